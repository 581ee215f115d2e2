package gdrdrv

import (
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
)

// recorder is a Syscalls that records the ioctls it is asked to issue.
type recorder struct {
	reqs []uint32
	args []unsafe.Pointer
}

func (r *recorder) Open(string) (int, error) { return 3, nil }
func (r *recorder) Close(int) error          { return nil }
func (r *recorder) Ioctl(_ int, req uint32, arg unsafe.Pointer) error {
	r.reqs = append(r.reqs, req)
	r.args = append(r.args, arg)
	return nil
}
func (r *recorder) Mmap(int, int64, int) ([]byte, error) { return nil, nil }
func (r *recorder) Munmap([]byte) error                  { return nil }
func (r *recorder) Reserve([]byte) error                 { return nil }

func TestWrappersIssueTheirCommand(t *testing.T) {
	var (
		pin   PinBufferParams
		pin2  PinBufferV2Params
		unpin UnpinBufferParams
		cb    GetCBFlagParams
		info  GetInfoParams
		info2 GetInfoV2Params
		attr  GetAttrParams
		req   ReqMappingTypeParams
		ver   GetVersionParams
	)
	tests := []struct {
		name string
		call func(Dev) error
		arg  unsafe.Pointer
		want uint32
	}{
		{"PinBuffer", func(d Dev) error { return d.PinBuffer(&pin) }, unsafe.Pointer(&pin), 0xC028DA01},
		{"PinBufferV2", func(d Dev) error { return d.PinBufferV2(&pin2) }, unsafe.Pointer(&pin2), 0xC020DA07},
		{"UnpinBuffer", func(d Dev) error { return d.UnpinBuffer(&unpin) }, unsafe.Pointer(&unpin), 0xC008DA02},
		{"GetCBFlag", func(d Dev) error { return d.GetCBFlag(&cb) }, unsafe.Pointer(&cb), 0xC008DA03},
		{"GetInfo", func(d Dev) error { return d.GetInfo(&info) }, unsafe.Pointer(&info), 0xC008DA04},
		{"GetInfoV2", func(d Dev) error { return d.GetInfoV2(&info2) }, unsafe.Pointer(&info2), 0xC008DA05},
		{"GetAttr", func(d Dev) error { return d.GetAttr(&attr) }, unsafe.Pointer(&attr), 0xC008DA06},
		{"ReqMappingType", func(d Dev) error { return d.ReqMappingType(&req) }, unsafe.Pointer(&req), 0xC008DA08},
		{"GetVersion", func(d Dev) error { return d.GetVersion(&ver) }, unsafe.Pointer(&ver), 0xC008DAFF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &recorder{}
			if err := tt.call(Dev{Sys: r, FD: 3}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]uint32{tt.want}, r.reqs); diff != "" {
				t.Errorf("commands (-want +got):\n%s", diff)
			}
			if len(r.args) != 1 || r.args[0] != tt.arg {
				t.Errorf("argument = %v, want the caller's structure %p", r.args, tt.arg)
			}
		})
	}
}
