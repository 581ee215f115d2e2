//go:build linux

package fakegdrdrv

import (
	"errors"
	"math"
	"os"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/p2pkit/p2pkit/gdrcopy/internal/gdrdrv"
)

const gpuPage = gdrdrv.GPUPageSize

func newModule(t *testing.T, cfg Config) (*Module, gdrdrv.Dev) {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := m.Open(DefaultPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(fd); err != nil && !errors.Is(err, unix.EBADF) {
			t.Error(err)
		}
		if err := m.Unload(); err != nil {
			t.Error(err)
		}
	})
	return m, gdrdrv.Dev{Sys: m, FD: fd}
}

func alloc(t *testing.T, m *Module, size uint64) uint64 {
	t.Helper()
	p, err := m.Alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func pin(t *testing.T, d gdrdrv.Dev, addr, size uint64) uint64 {
	t.Helper()
	p := gdrdrv.PinBufferV2Params{Addr: addr, Size: size}
	if err := d.PinBufferV2(&p); err != nil {
		t.Fatalf("pin %#x+%d: %v", addr, size, err)
	}
	return p.Handle
}

// Version gating: each command exists from its driver version on, and
// older drivers answer ENOTTY (gdrdrv.c gdrdrv_ioctl's default case).
func TestVersionGating(t *testing.T) {
	cmds := []uint32{
		gdrdrv.IocGetVersion, gdrdrv.IocPinBuffer, gdrdrv.IocGetInfoV2,
		gdrdrv.IocGetAttr, gdrdrv.IocPinBufferV2, gdrdrv.IocReqMappingType,
	}
	tests := []struct {
		version uint32
		known   []bool
	}{
		{0x00010004, []bool{false, false, false, false, false, false}},
		{0x00020000, []bool{true, true, false, false, false, false}},
		{0x00020004, []bool{true, true, true, false, false, false}},
		{0x00020005, []bool{true, true, true, true, true, true}},
		{0x00020006, []bool{true, true, true, true, true, true}},
	}
	for _, tt := range tests {
		m, d := newModule(t, Config{Version: tt.version, Persistent: true})
		ptr := alloc(t, m, gpuPage)
		var got []bool
		for _, cmd := range cmds {
			var buf [48]byte // large enough for every structure
			put64(buf[:], 0, ptr)
			put64(buf[:], 8, gpuPage)
			if cmd == gdrdrv.IocGetAttr || cmd == gdrdrv.IocReqMappingType {
				put64(buf[:], 0, 1) // attribute 1; handle 1 (EINVAL if unknown)
			}
			err := m.Ioctl(d.FD, cmd, unsafe.Pointer(&buf))
			got = append(got, !errors.Is(err, unix.ENOTTY))
		}
		if diff := cmp.Diff(tt.known, got); diff != "" {
			t.Errorf("version %#x: commands known (-want +got):\n%s", tt.version, diff)
		}
	}
}

func TestDispatchErrors(t *testing.T) {
	m, d := newModule(t, Config{})
	var v gdrdrv.GetVersionParams
	if err := m.Ioctl(d.FD, 0xC008AB01, unsafe.Pointer(&v)); err != unix.EINVAL {
		t.Errorf("foreign ioctl type: %v, want EINVAL", err)
	}
	if err := m.Ioctl(d.FD, 0xC008DA42, unsafe.Pointer(&v)); err != unix.ENOTTY {
		t.Errorf("unknown command: %v, want ENOTTY", err)
	}
	if err := m.Ioctl(d.FD+1000, gdrdrv.IocGetVersion, unsafe.Pointer(&v)); err != unix.EBADF {
		t.Errorf("unknown descriptor: %v, want EBADF", err)
	}
	m.SetProcess(-1)
	if err := d.GetVersion(&v); err != unix.EACCES {
		t.Errorf("other process: %v, want EACCES", err)
	}
	if _, err := d.MmapHandle(0, 4096); err != unix.EACCES {
		t.Errorf("mmap from other process: %v, want EACCES", err)
	}
	m.SetProcess(os.Getpid())
	if err := d.GetVersion(&v); err != nil || v.DriverVersion != gdrdrv.DriverVersion || v.MinimumAPIVersion != gdrdrv.MinimumAPIVersion {
		t.Errorf("GET_VERSION = %+v, %v", v, err)
	}
}

// gdrdrv.c __gdrdrv_pin_buffer: rounding, the mode checks, handles.
func TestPin(t *testing.T) {
	m, d := newModule(t, Config{})
	base := alloc(t, m, 4*gpuPage)
	h := pin(t, d, base+100, gpuPage) // spans two GPU pages
	info := gdrdrv.GetInfoV2Params{Handle: h}
	if err := d.GetInfoV2(&info); err != nil {
		t.Fatal(err)
	}
	if info.VA != base || info.MappedSize != 2*gpuPage || info.PageSize != uint32(gpuPage) || info.MappingType != gdrdrv.MRNone {
		t.Errorf("GET_INFO_V2 = %+v", info)
	}
	// The second handle follows the first by its pages.
	if h2 := pin(t, d, base, 1); h2 != 2*gpuPage>>gdrdrv.PageShift(os.Getpagesize()) {
		t.Errorf("second handle = %d", h2)
	}

	tests := []struct {
		name string
		cfg  Config
		p    gdrdrv.PinBufferParams
		v2   *gdrdrv.PinBufferV2Params
		want error
	}{
		{"null", Config{}, gdrdrv.PinBufferParams{Addr: 0, Size: 1}, nil, unix.EINVAL},
		{"tokens in persistent mode", Config{Persistent: true}, gdrdrv.PinBufferParams{Size: 1, P2PToken: 1}, nil, unix.EINVAL},
		{"va_space in persistent mode", Config{Persistent: true}, gdrdrv.PinBufferParams{Size: 1, VASpace: 1}, nil, unix.EINVAL},
		{"tokens in legacy mode", Config{}, gdrdrv.PinBufferParams{Size: 1, P2PToken: 1, VASpace: 1}, nil, nil},
		{"unknown flag", Config{Persistent: true, ForcePCIe: true}, gdrdrv.PinBufferParams{}, &gdrdrv.PinBufferV2Params{Size: 1, Flags: 2}, unix.EINVAL},
		{"flags in legacy mode", Config{ForcePCIe: true}, gdrdrv.PinBufferParams{}, &gdrdrv.PinBufferV2Params{Size: 1, Flags: 1}, unix.EINVAL},
		{"force PCIe", Config{Persistent: true, ForcePCIe: true}, gdrdrv.PinBufferParams{}, &gdrdrv.PinBufferV2Params{Size: 1, Flags: 1}, nil},
		{"zero length", Config{}, gdrdrv.PinBufferParams{Size: 0}, nil, unix.EINVAL},
		{"wraps", Config{}, gdrdrv.PinBufferParams{Size: math.MaxUint64}, nil, unix.EINVAL},
		{"unallocated", Config{}, gdrdrv.PinBufferParams{Size: 5 * gpuPage}, nil, unix.EINVAL},
		{"BAR1", Config{BAR1Size: gpuPage}, gdrdrv.PinBufferParams{Size: gpuPage + 1}, nil, unix.ENOMEM},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, d := newModule(t, tt.cfg)
			ptr := alloc(t, m, 4*gpuPage)
			var err error
			if tt.v2 != nil {
				tt.v2.Addr = ptr
				err = d.PinBufferV2(tt.v2)
			} else {
				if tt.name != "null" {
					tt.p.Addr = ptr
				}
				err = d.PinBuffer(&tt.p)
			}
			if err != tt.want {
				t.Errorf("pin: %v, want %v", err, tt.want)
			}
		})
	}
}

// gdrdrv.c gdr_generate_mr_handle: handles run out rather than wrap.
func TestHandleExhaustion(t *testing.T) {
	shift := gdrdrv.PageShift(os.Getpagesize())
	m, d := newModule(t, Config{FirstHandle: math.MaxUint64>>shift - 1})
	ptr := alloc(t, m, gpuPage)
	pin(t, d, ptr, gpuPage)
	p := gdrdrv.PinBufferV2Params{Addr: ptr, Size: gpuPage}
	if err := d.PinBufferV2(&p); err != unix.ENOMEM {
		t.Errorf("pin after the handles ran out: %v, want ENOMEM", err)
	}
	if got := m.Stats().Pinned; got != 1 {
		t.Errorf("%d pins held, want 1", got)
	}
}

// gdrdrv.c gdrdrv_mmap, in the order it checks.
func TestMmap(t *testing.T) {
	m, d := newModule(t, Config{})
	base := alloc(t, m, 4*gpuPage)
	aligned := pin(t, d, base, gpuPage)
	unaligned := pin(t, d, base+gpuPage+8, 8)
	ps := os.Getpagesize()

	if _, err := m.Mmap(d.FD, 1, ps); err != unix.EINVAL {
		t.Errorf("unaligned offset: %v, want EINVAL", err)
	}
	if _, err := m.Mmap(d.FD, 0, 0); err != unix.EINVAL {
		t.Errorf("empty: %v, want EINVAL", err)
	}
	if _, err := d.MmapHandle(unaligned, ps); err != unix.EINVAL {
		t.Errorf("pin not starting a GPU page: %v, want EINVAL", err)
	}
	if _, err := d.MmapHandle(aligned, int(gpuPage)+1); err != unix.EINVAL {
		t.Errorf("longer than the pin: %v, want EINVAL", err)
	}
	b, err := d.MmapHandle(aligned, int(gpuPage))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.MmapHandle(aligned, ps); err != unix.EINVAL {
		t.Errorf("second mapping: %v, want EINVAL", err)
	}
	req := gdrdrv.ReqMappingTypeParams{Handle: aligned, MappingType: gdrdrv.MRWC}
	if err := d.ReqMappingType(&req); err != unix.EBUSY {
		t.Errorf("REQ_MAPPING_TYPE while mapped: %v, want EBUSY", err)
	}
	// The mapping reaches GPU memory.
	copy(b, "written via BAR")
	got := make([]byte, 15)
	if err := m.ReadDevice(got, base); err != nil || string(got) != "written via BAR" {
		t.Errorf("device holds %q, %v", got, err)
	}
	if err := m.Munmap(b); err != nil {
		t.Fatal(err)
	}
	// Unmapped, it may be mapped again.
	b, err = d.MmapHandle(aligned, ps)
	if err != nil {
		t.Fatalf("remap: %v", err)
	}
	if err := m.Munmap(b); err != nil {
		t.Fatal(err)
	}
}

// gdrdrv.c gdrdrv_req_mapping_type and the type gdrdrv_mmap picks.
func TestMappingType(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		req     uint32
		wantErr error
		want    uint32
	}{
		{"default", Config{}, gdrdrv.MRNone, nil, gdrdrv.MRWC},
		{"WC", Config{}, gdrdrv.MRWC, nil, gdrdrv.MRWC},
		{"caching unsupported", Config{}, gdrdrv.MRCaching, unix.EOPNOTSUPP, gdrdrv.MRWC},
		{"device unsupported", Config{}, gdrdrv.MRDevice, unix.EOPNOTSUPP, gdrdrv.MRWC},
		{"out of range", Config{}, 4, unix.EINVAL, gdrdrv.MRWC},
		{"coherent default", Config{Cacheable: true}, gdrdrv.MRNone, nil, gdrdrv.MRCaching},
		{"coherent WC", Config{Cacheable: true}, gdrdrv.MRWC, nil, gdrdrv.MRWC},
		{"BF3 default", Config{DeviceMapping: true}, gdrdrv.MRNone, nil, gdrdrv.MRDevice},
		{"BF3 WC", Config{DeviceMapping: true}, gdrdrv.MRWC, unix.EOPNOTSUPP, gdrdrv.MRDevice},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, d := newModule(t, tt.cfg)
			h := pin(t, d, alloc(t, m, gpuPage), gpuPage)
			req := gdrdrv.ReqMappingTypeParams{Handle: h, MappingType: tt.req}
			if err := d.ReqMappingType(&req); err != tt.wantErr {
				t.Errorf("REQ_MAPPING_TYPE: %v, want %v", err, tt.wantErr)
			}
			b, err := d.MmapHandle(h, os.Getpagesize())
			if err != nil {
				t.Fatal(err)
			}
			defer m.Munmap(b)
			info := gdrdrv.GetInfoParams{Handle: h}
			if err := d.GetInfo(&info); err != nil {
				t.Fatal(err)
			}
			info2 := gdrdrv.GetInfoV2Params{Handle: h}
			if err := d.GetInfoV2(&info2); err != nil {
				t.Fatal(err)
			}
			if info2.MappingType != tt.want || info.Mapped != 1 || (info.WCMapping == 1) != (tt.want == gdrdrv.MRWC) {
				t.Errorf("GET_INFO_V2 type %d, GET_INFO mapped %d wc %d; want type %d", info2.MappingType, info.Mapped, info.WCMapping, tt.want)
			}
		})
	}
}

func TestGetAttr(t *testing.T) {
	_, d := newModule(t, Config{Persistent: true, ForcePCIe: true})
	got := map[uint32]uint32{}
	for _, attr := range []uint32{gdrdrv.AttrUsePersistentMapping, gdrdrv.AttrSupportPinFlagForcePCIe} {
		p := gdrdrv.GetAttrParams{Attr: attr}
		if err := d.GetAttr(&p); err != nil {
			t.Fatal(err)
		}
		got[attr] = p.Val
	}
	if diff := cmp.Diff(map[uint32]uint32{1: 1, 2: 1}, got); diff != "" {
		t.Errorf("attributes (-want +got):\n%s", diff)
	}
	p := gdrdrv.GetAttrParams{Attr: 3, Val: 77}
	if err := d.GetAttr(&p); err != unix.EINVAL || p.Val != 77 {
		t.Errorf("unknown attribute: %v, val %d; want EINVAL and val left as written", err, p.Val)
	}
}

// The free callback (non-persistent mode) flags the pin, drops it from
// BAR1 and zaps the mapping; a fresh mmap is refused.
func TestFreeCallback(t *testing.T) {
	m, d := newModule(t, Config{})
	ptr := alloc(t, m, gpuPage)
	h := pin(t, d, ptr, gpuPage)
	b, err := d.MmapHandle(h, int(gpuPage))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Free(ptr); err != nil {
		t.Fatal(err)
	}
	cb := gdrdrv.GetCBFlagParams{Handle: h}
	if err := d.GetCBFlag(&cb); err != nil || cb.Flag != 1 {
		t.Errorf("GET_CB_FLAG = %d, %v; want 1", cb.Flag, err)
	}
	info := gdrdrv.GetInfoV2Params{Handle: h}
	if err := d.GetInfoV2(&info); err != nil || info.MappingType != gdrdrv.MRNone {
		t.Errorf("GET_INFO_V2 after the callback: type %d, %v; want unmapped", info.MappingType, err)
	}
	if err := m.Munmap(b); err != nil {
		t.Fatal(err)
	}
	if _, err := d.MmapHandle(h, int(gpuPage)); err != unix.EINVAL {
		t.Errorf("mmap after the callback: %v, want EINVAL", err)
	}
	unpin := gdrdrv.UnpinBufferParams{Handle: h}
	if err := d.UnpinBuffer(&unpin); err != nil {
		t.Fatal(err)
	}
}

// gdrdrv.c gdr_mr_from_handle_unlocked returns the oldest pin for an
// unknown handle, and NULL only when nothing is pinned.
func TestStaleHandleQuirk(t *testing.T) {
	m, d := newModule(t, Config{})
	ptr := alloc(t, m, 2*gpuPage)
	cb := gdrdrv.GetCBFlagParams{Handle: 12345}
	if err := d.GetCBFlag(&cb); err != unix.EINVAL {
		t.Errorf("unknown handle, nothing pinned: %v, want EINVAL", err)
	}
	oldest := pin(t, d, ptr+gpuPage, 1)
	pin(t, d, ptr, 1)
	info := gdrdrv.GetInfoV2Params{Handle: 12345}
	if err := d.GetInfoV2(&info); err != nil || info.VA != ptr+gpuPage {
		t.Errorf("unknown handle: VA %#x, %v; want the oldest pin's %#x", info.VA, err, ptr+gpuPage)
	}
	unpin := gdrdrv.UnpinBufferParams{Handle: 12345}
	if err := d.UnpinBuffer(&unpin); err != nil {
		t.Fatal(err)
	}
	info = gdrdrv.GetInfoV2Params{Handle: oldest}
	if err := d.GetInfoV2(&info); err != nil || info.VA != ptr {
		t.Errorf("after unpinning an unknown handle, handle %d answers VA %#x, %v; the quirk unpinned it", oldest, info.VA, err)
	}
}

// Closing the descriptor releases its pins (gdrdrv.c gdrdrv_release), but
// only once no mapping holds the file.
func TestReleaseOnLastReference(t *testing.T) {
	m, d := newModule(t, Config{})
	ptr := alloc(t, m, gpuPage)
	h := pin(t, d, ptr, gpuPage)
	pin(t, d, ptr, 1)
	b, err := d.MmapHandle(h, int(gpuPage))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(d.FD); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Stats{Files: 1, Pinned: 2, Mapped: 1}, m.Stats()); diff != "" {
		t.Errorf("closed but mapped (-want +got):\n%s", diff)
	}
	copy(b, "still mapped")
	if err := m.Munmap(b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Stats{}, m.Stats()); diff != "" {
		t.Errorf("after the last unmap (-want +got):\n%s", diff)
	}
}

func TestOpen(t *testing.T) {
	m, err := New(Config{OpenErr: unix.ENXIO})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unload()
	if _, err := m.Open(DefaultPath); err != unix.ENXIO {
		t.Errorf("open: %v, want ENXIO", err)
	}
	if _, err := m.Open("/dev/other"); err != unix.ENOENT {
		t.Errorf("open of another path: %v, want ENOENT", err)
	}
}
