//go:build linux

package gdrcopy

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/gdrcopy/internal/fakegdrdrv"
	"github.com/p2pkit/p2pkit/gdrcopy/internal/gdrdrv"
)

// Each driver version gets the commands libgdrapi would send it: the same
// client code, gated on GET_VERSION.
func TestVersionCommandSets(t *testing.T) {
	tests := []struct {
		version Version
		want    []uint32
	}{
		{v2_0, []uint32{gdrdrv.IocGetVersion, gdrdrv.IocPinBuffer, gdrdrv.IocGetInfo, gdrdrv.IocGetInfo, gdrdrv.IocGetCBFlag, gdrdrv.IocUnpinBuffer}},
		{v2_4, []uint32{gdrdrv.IocGetVersion, gdrdrv.IocPinBuffer, gdrdrv.IocGetInfoV2, gdrdrv.IocGetInfoV2, gdrdrv.IocGetCBFlag, gdrdrv.IocUnpinBuffer}},
		{v2_5, []uint32{gdrdrv.IocGetVersion, gdrdrv.IocGetAttr, gdrdrv.IocPinBufferV2, gdrdrv.IocReqMappingType, gdrdrv.IocGetInfoV2, gdrdrv.IocGetInfoV2, gdrdrv.IocGetCBFlag, gdrdrv.IocUnpinBuffer}},
		{v2_6, []uint32{gdrdrv.IocGetVersion, gdrdrv.IocGetAttr, gdrdrv.IocPinBufferV2, gdrdrv.IocReqMappingType, gdrdrv.IocGetInfoV2, gdrdrv.IocGetInfoV2, gdrdrv.IocGetCBFlag, gdrdrv.IocUnpinBuffer}},
	}
	for _, tt := range tests {
		t.Run(tt.version.String(), func(t *testing.T) {
			mod := newModule(t, fakegdrdrv.Config{Version: uint32(tt.version)})
			rec := &recorder{Syscalls: mod}
			d, err := open(rec, fakegdrdrv.DefaultPath)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			ptr := allocAligned(t, mod, 64<<10)
			b, m := pinMap(t, d, ptr, 64<<10)
			if m.Type() != MappingWC {
				t.Errorf("mapping type = %s, want write-combining", m.Type())
			}
			if info, err := b.Info(); err != nil || info.Mapping != MappingWC {
				t.Errorf("Info() = %+v, %v; want a write-combining mapping", info, err)
			}
			if _, err := b.Invalidated(); err != nil {
				t.Fatal(err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, rec.commands()); diff != "" {
				t.Errorf("ioctl commands (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	tests := []struct {
		name     string
		cfg      fakegdrdrv.Config
		path     string
		wantIs   []error
		wantText string
	}{
		{"no node", fakegdrdrv.Config{OpenErr: syscall.ENOENT}, "", []error{ErrDriverNotLoaded, fs.ErrNotExist}, "insmod.sh"},
		{"other path", fakegdrdrv.Config{}, "/dev/nope", []error{ErrDriverNotLoaded, fs.ErrNotExist}, "mknod"},
		{"no driver for the major", fakegdrdrv.Config{OpenErr: syscall.ENXIO}, "", []error{ErrDriverNotLoaded}, "/proc/devices"},
		{"mode denies", fakegdrdrv.Config{OpenErr: syscall.EACCES}, "", []error{fs.ErrPermission}, "0666"},
		{"node of another driver", fakegdrdrv.Config{OtherDriver: true}, "", []error{ErrDriverNotLoaded}, "stale"},
		{"driver older than 2.0", fakegdrdrv.Config{Version: uint32(NewVersion(1, 4))}, "", []error{ErrNotSupported}, "GET_VERSION"},
		{"driver wants a newer client", fakegdrdrv.Config{MinimumAPIVersion: uint32(NewVersion(2, 7))}, "", []error{ErrNotSupported}, "2.7"},
		{"driver wants a new major", fakegdrdrv.Config{Version: uint32(NewVersion(3, 0)), MinimumAPIVersion: uint32(NewVersion(3, 0))}, "", []error{ErrNotSupported}, "3.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mod := newModule(t, tt.cfg)
			path := tt.path
			if path == "" {
				path = fakegdrdrv.DefaultPath
			}
			d, err := open(mod, path)
			if err == nil {
				d.Close()
				t.Fatal("open succeeded")
			}
			for _, target := range tt.wantIs {
				if !errors.Is(err, target) {
					t.Errorf("err = %v; want it to match %v", err, target)
				}
			}
			if !strings.Contains(err.Error(), tt.wantText) || !strings.HasPrefix(err.Error(), "gdrcopy: ") {
				t.Errorf("err = %q; want the prefix gdrcopy: and the text %q", err, tt.wantText)
			}
		})
	}
}

func TestOpenAcceptsNewerMinor(t *testing.T) {
	d, _ := openFake(t, fakegdrdrv.Config{Version: uint32(NewVersion(2, 9))})
	if d.Version() != NewVersion(2, 9) {
		t.Errorf("Version() = %s, want 2.9", d.Version())
	}
}

// A descriptor used by another process: gdrdrv answers EACCES to every
// ioctl and mmap (gdrdrv.c gdrdrv_check_same_process).
func TestForeignProcess(t *testing.T) {
	d, mod := openFake(t, fakegdrdrv.Config{})
	ptr := allocAligned(t, mod, 64<<10)
	b, err := d.Pin(ptr, 64<<10, PinDefault)
	if err != nil {
		t.Fatal(err)
	}
	mod.SetProcess(-1)
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrForeignProcess) || !errors.Is(err, fs.ErrPermission) {
			t.Errorf("%s: err = %v, want ErrForeignProcess and fs.ErrPermission", what, err)
		}
	}
	_, err = d.Pin(ptr, 64<<10, PinDefault)
	check("pin", err)
	_, err = b.Map()
	check("map", err)
	_, err = b.Info()
	check("info", err)
	_, err = d.Attributes()
	check("attributes", err)
	mod.SetProcess(os.Getpid())
}

func TestPinErrors(t *testing.T) {
	const size = 64 << 10
	tests := []struct {
		name    string
		cfg     fakegdrdrv.Config
		pin     func(d *Driver, ptr uint64) error
		wantIs  error
		wantMsg string
	}{
		{"not allocated", fakegdrdrv.Config{}, func(d *Driver, ptr uint64) error {
			_, err := d.Pin(ptr+1<<30, size, PinDefault)
			return err
		}, syscall.EINVAL, "invalid argument"},
		{"null", fakegdrdrv.Config{}, func(d *Driver, ptr uint64) error {
			_, err := d.Pin(0, size, PinDefault)
			return err
		}, syscall.EINVAL, "invalid argument"},
		{"empty", fakegdrdrv.Config{}, func(d *Driver, ptr uint64) error {
			_, err := d.Pin(ptr, 0, PinDefault)
			return err
		}, nil, "empty range"},
		{"wraps", fakegdrdrv.Config{}, func(d *Driver, ptr uint64) error {
			_, err := d.Pin(math.MaxUint64-10, 100, PinDefault)
			return err
		}, nil, "overflows"},
		{"unknown flags", fakegdrdrv.Config{}, func(d *Driver, ptr uint64) error {
			_, err := d.Pin(ptr, size, 4)
			return err
		}, nil, "unknown flags"},
		{"FORCE_PCIE on 2.4", fakegdrdrv.Config{Version: uint32(v2_4), Persistent: true, ForcePCIe: true}, func(d *Driver, ptr uint64) error {
			_, err := d.Pin(ptr, size, PinForcePCIe)
			return err
		}, ErrNotSupported, "2.5"},
		{"FORCE_PCIE, non-persistent", fakegdrdrv.Config{ForcePCIe: true}, func(d *Driver, ptr uint64) error {
			_, err := d.Pin(ptr, size, PinForcePCIe)
			return err
		}, syscall.EINVAL, "invalid argument"},
		{"FORCE_PCIE, not built in", fakegdrdrv.Config{Persistent: true}, func(d *Driver, ptr uint64) error {
			_, err := d.Pin(ptr, size, PinForcePCIe)
			return err
		}, syscall.EINVAL, "invalid argument"},
		{"BAR1 exhausted", fakegdrdrv.Config{BAR1Size: size}, func(d *Driver, ptr uint64) error {
			_, err := d.Pin(ptr, 2*size, PinDefault)
			return err
		}, syscall.ENOMEM, "cannot allocate memory"},
		{"handles exhausted", fakegdrdrv.Config{FirstHandle: math.MaxUint64 >> gdrdrv.PageShift(osPageSize())}, func(d *Driver, ptr uint64) error {
			if _, err := d.Pin(ptr, size, PinDefault); err != nil {
				return fmt.Errorf("first pin: %w", err)
			}
			_, err := d.Pin(ptr, size, PinDefault)
			return err
		}, syscall.ENOMEM, "cannot allocate memory"},
		{"handle beyond the mmap offset range", fakegdrdrv.Config{FirstHandle: math.MaxUint64 >> gdrdrv.PageShift(osPageSize())}, func(d *Driver, ptr uint64) error {
			b, err := d.Pin(ptr, size, PinDefault)
			if err != nil {
				return fmt.Errorf("pin: %w", err)
			}
			_, err = b.Map()
			return err
		}, nil, "overflows the mmap offset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, mod := openFake(t, tt.cfg)
			ptr := allocAligned(t, mod, 2*size)
			err := tt.pin(d, ptr)
			if err == nil {
				t.Fatal("succeeded")
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("err = %v; want it to match %v", err, tt.wantIs)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) || !strings.HasPrefix(err.Error(), "gdrcopy: ") {
				t.Errorf("err = %q; want the prefix gdrcopy: and %q", err, tt.wantMsg)
			}
		})
	}
}

// FORCE_PCIE pins on a driver that supports them.
func TestPinForcePCIe(t *testing.T) {
	d, mod := openFake(t, fakegdrdrv.Config{Persistent: true, ForcePCIe: true, Cacheable: true})
	ptr := allocAligned(t, mod, 64<<10)
	b, err := d.Pin(ptr, 64<<10, PinForcePCIe)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Map()
	if err != nil {
		t.Fatal(err)
	}
	// A forced BAR1 pin is never cacheable, even on a coherent platform.
	if m.Type() != MappingWC {
		t.Errorf("mapping type = %s, want write-combining", m.Type())
	}
}

// The driver picks the mapping type (gdrdrv.c gdrdrv_mmap), and copies work
// on each.
func TestMappingTypes(t *testing.T) {
	tests := []struct {
		cfg  fakegdrdrv.Config
		want MappingType
	}{
		{fakegdrdrv.Config{}, MappingWC},
		{fakegdrdrv.Config{Cacheable: true}, MappingCaching},
		{fakegdrdrv.Config{DeviceMapping: true}, MappingDevice},
		{fakegdrdrv.Config{Version: uint32(v2_0)}, MappingWC},
		{fakegdrdrv.Config{Version: uint32(v2_0), Cacheable: true}, MappingCaching},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%+v", tt.cfg), func(t *testing.T) {
			d, mod := openFake(t, tt.cfg)
			ptr := allocAligned(t, mod, 64<<10)
			_, m := pinMap(t, d, ptr, 64<<10)
			if m.Type() != tt.want {
				t.Errorf("Type() = %s, want %s", m.Type(), tt.want)
			}
			want := []byte("gdrcopy")
			if err := m.CopyToDevice(100, want); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(want))
			if err := m.CopyFromDevice(got, 100); err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("read back %q, want %q", got, want)
			}
		})
	}
}

func TestMappingTypeString(t *testing.T) {
	got := []string{MappingNone.String(), MappingWC.String(), MappingCaching.String(), MappingDevice.String(), MappingType(9).String()}
	want := []string{"none", "write-combining", "caching", "device", "MappingType(9)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("String() (-want +got):\n%s", diff)
	}
}

// io_remap_pfn_range failures come back as EAGAIN (issues #44, #240).
func TestMapRemapFails(t *testing.T) {
	d, mod := openFake(t, fakegdrdrv.Config{RemapFails: true})
	ptr := allocAligned(t, mod, 64<<10)
	b, err := d.Pin(ptr, 64<<10, PinDefault)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Map(); !errors.Is(err, syscall.EAGAIN) || !strings.Contains(err.Error(), "PAT") {
		t.Errorf("map: err = %v, want EAGAIN with the PAT explanation", err)
	}
}

// A mapping covers the pinned size; the pin covers whole GPU pages.
func TestMappingLength(t *testing.T) {
	tests := []struct {
		size       uint64
		wantMapped uint64
	}{
		{1, 64 << 10},
		{4096, 64 << 10},
		{64<<10 + 1, 128 << 10},
		{1 << 20, 1 << 20},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.size), func(t *testing.T) {
			d, mod := openFake(t, fakegdrdrv.Config{})
			ptr := allocAligned(t, mod, tt.size)
			b, m := pinMap(t, d, ptr, tt.size)
			if m.Len() != int(tt.size) || len(m.Bytes()) != int(tt.size) {
				t.Errorf("Len() = %d, len(Bytes()) = %d; want %d", m.Len(), len(m.Bytes()), tt.size)
			}
			info, err := b.Info()
			if err != nil {
				t.Fatal(err)
			}
			if info.MappedSize != tt.wantMapped {
				t.Errorf("MappedSize = %d, want %d", info.MappedSize, tt.wantMapped)
			}
			if b.Addr() != ptr || b.Size() != tt.size {
				t.Errorf("Addr(), Size() = %#x, %d; want %#x, %d", b.Addr(), b.Size(), ptr, tt.size)
			}
		})
	}
}

// Driver.Close releases every pin and mapping, as gdr_close unpins every
// handle, and more: it unmaps them too.
func TestDriverCloseReleasesEverything(t *testing.T) {
	d, mod := openFake(t, fakegdrdrv.Config{})
	for range 4 {
		ptr := allocAligned(t, mod, 128<<10)
		pinMap(t, d, ptr, 128<<10)
		if _, err := d.Pin(ptr, 64<<10, PinDefault); err != nil {
			t.Fatal(err)
		}
	}
	if got := mod.Stats(); got.Pinned != 8 || got.Mapped != 4 {
		t.Fatalf("Stats() = %+v before close, want 8 pins and 4 mappings", got)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fakegdrdrv.Stats{}, mod.Stats()); diff != "" {
		t.Errorf("after Close (-want +got):\n%s", diff)
	}
}

// MapAs asks for a mapping type, as gdr_map_v2 does.
func TestMapAs(t *testing.T) {
	tests := []struct {
		name    string
		cfg     fakegdrdrv.Config
		req     MappingType
		want    MappingType
		wantErr error
	}{
		{"default", fakegdrdrv.Config{}, MappingNone, MappingWC, nil},
		{"WC", fakegdrdrv.Config{}, MappingWC, MappingWC, nil},
		{"caching, not coherent", fakegdrdrv.Config{}, MappingCaching, 0, ErrNotSupported},
		{"device, not BlueField-3", fakegdrdrv.Config{}, MappingDevice, 0, ErrNotSupported},
		{"coherent default", fakegdrdrv.Config{Cacheable: true}, MappingNone, MappingCaching, nil},
		{"coherent caching", fakegdrdrv.Config{Cacheable: true}, MappingCaching, MappingCaching, nil},
		{"coherent WC", fakegdrdrv.Config{Cacheable: true}, MappingWC, MappingWC, nil},
		{"BlueField-3 device", fakegdrdrv.Config{DeviceMapping: true}, MappingDevice, MappingDevice, nil},
		{"BlueField-3 WC", fakegdrdrv.Config{DeviceMapping: true}, MappingWC, 0, ErrNotSupported},
		{"2.4 default", fakegdrdrv.Config{Version: uint32(v2_4)}, MappingNone, MappingWC, nil},
		{"2.4 WC", fakegdrdrv.Config{Version: uint32(v2_4)}, MappingWC, 0, ErrNotSupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, mod := openFake(t, tt.cfg)
			b, err := d.Pin(allocAligned(t, mod, 64<<10), 64<<10, PinDefault)
			if err != nil {
				t.Fatal(err)
			}
			m, err := b.MapAs(tt.req)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("MapAs(%s): err = %v, want %v", tt.req, err, tt.wantErr)
				}
				// A refused request leaves the buffer mappable.
				if _, err := b.Map(); err != nil {
					t.Errorf("Map after a refused MapAs: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("MapAs(%s): %v", tt.req, err)
			}
			if m.Type() != tt.want {
				t.Errorf("MapAs(%s) made a %s mapping, want %s", tt.req, m.Type(), tt.want)
			}
		})
	}
	t.Run("unknown type", func(t *testing.T) {
		d, mod := openFake(t, fakegdrdrv.Config{})
		b, err := d.Pin(allocAligned(t, mod, 64<<10), 64<<10, PinDefault)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.MapAs(7); err == nil || !strings.Contains(err.Error(), "unknown mapping type") {
			t.Errorf("MapAs(7): err = %v, want an unknown-type error", err)
		}
	})
}

// Every copy runs under the fault guard. A fault on the mapping is
// ErrInvalidated where the driver may tear mappings down (non-persistent
// mode, or a driver older than 2.5 that cannot say), and ErrFault in
// persistent mode, where nothing should; later copies fail fast the same
// way, and Close still works.
func TestFaultGuard(t *testing.T) {
	tests := []struct {
		cfg  fakegdrdrv.Config
		want error
	}{
		{fakegdrdrv.Config{}, ErrInvalidated},
		{fakegdrdrv.Config{Persistent: true}, ErrFault},
		{fakegdrdrv.Config{Version: uint32(v2_5), Persistent: true}, ErrFault},
		{fakegdrdrv.Config{Version: uint32(v2_4), Persistent: true}, ErrInvalidated},
		{fakegdrdrv.Config{Version: uint32(v2_0)}, ErrInvalidated},
	}
	for _, tt := range tests {
		for _, dir := range []string{"to", "from"} {
			t.Run(fmt.Sprintf("%+v/%s", tt.cfg, dir), func(t *testing.T) {
				d, mod := openFake(t, tt.cfg)
				ptr := allocAligned(t, mod, 64<<10)
				_, m := pinMap(t, d, ptr, 64<<10)
				buf := make([]byte, 4096)
				copyOnce := func() error {
					if dir == "to" {
						return m.CopyToDevice(100, buf)
					}
					return m.CopyFromDevice(buf, 100)
				}
				if err := copyOnce(); err != nil {
					t.Fatalf("copy before the fault: %v", err)
				}
				if err := mod.Zap(ptr); err != nil {
					t.Fatal(err)
				}
				err := copyOnce()
				if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), "faulted at") {
					t.Fatalf("copy on the zapped mapping: err = %v, want %v naming the address", err, tt.want)
				}
				if err := copyOnce(); !errors.Is(err, tt.want) {
					t.Errorf("copy after the fault: err = %v, want %v", err, tt.want)
				}
				if err := m.Close(); err != nil {
					t.Errorf("close after the fault: %v", err)
				}
				if err := copyOnce(); !errors.Is(err, fs.ErrClosed) {
					t.Errorf("copy after close: err = %v, want fs.ErrClosed", err)
				}
			})
		}
	}
}

// Objects dropped without Close are released by their cleanups once
// collected: the mapping is unmapped and the descriptor closed, which
// releases the pins (gdrdrv.c gdrdrv_release).
func TestCleanupSafetyNet(t *testing.T) {
	mod := newModule(t, fakegdrdrv.Config{})
	func() {
		d, err := open(mod, fakegdrdrv.DefaultPath)
		if err != nil {
			t.Fatal(err)
		}
		ptr, err := mod.Alloc(128 << 10)
		if err != nil {
			t.Fatal(err)
		}
		pinMap(t, d, ptr, 64<<10)
		if _, err := d.Pin(ptr, 64<<10, PinDefault); err != nil {
			t.Fatal(err)
		}
	}()
	// Cleanups run on their own goroutine after the cycle that finds the
	// objects unreachable; give them a bounded number of cycles.
	for i := 0; mod.Stats() != (fakegdrdrv.Stats{}); i++ {
		if i == 1000 {
			t.Fatalf("after dropping everything and %d collections the module still holds %+v", i, mod.Stats())
		}
		runtime.GC()
		runtime.Gosched()
	}
}
