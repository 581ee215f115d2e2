//go:build linux

package gdrcopy

import (
	"os"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/gdrcopy/internal/fakegdrdrv"
	"github.com/p2pkit/p2pkit/gdrcopy/internal/gdrdrv"
)

// The driver versions whose command sets differ.
var (
	v2_0 = NewVersion(2, 0) // PIN_BUFFER, GET_INFO
	v2_4 = NewVersion(2, 4) // + GET_INFO_V2
	v2_5 = NewVersion(2, 5) // + GET_ATTR, PIN_BUFFER_V2, REQ_MAPPING_TYPE
	v2_6 = NewVersion(2, 6) // current
)

var allVersions = []Version{v2_0, v2_4, v2_5, v2_6}

// newModule returns a fake gdrdrv that the test unloads at the end, after
// checking that everything was released.
func newModule(t testing.TB, cfg fakegdrdrv.Config) *fakegdrdrv.Module {
	t.Helper()
	mod, err := fakegdrdrv.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if diff := cmp.Diff(fakegdrdrv.Stats{}, mod.Stats()); diff != "" {
			t.Errorf("module still holds resources (-want +got):\n%s", diff)
		}
		if err := mod.Unload(); err != nil {
			t.Error(err)
		}
	})
	return mod
}

// openFake opens a Driver over a fake gdrdrv through the same code path
// Open takes; only the syscall boundary differs. The test closes it.
func openFake(t testing.TB, cfg fakegdrdrv.Config) (*Driver, *fakegdrdrv.Module) {
	t.Helper()
	mod := newModule(t, cfg)
	d, err := open(mod, fakegdrdrv.DefaultPath)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("close driver: %v", err)
		}
	})
	return d, mod
}

// alloc simulates cuMemAlloc and frees at the end of the test if the test
// did not.
func alloc(t testing.TB, mod *fakegdrdrv.Module, size uint64) uint64 {
	t.Helper()
	ptr, err := mod.Alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mod.Free(ptr) })
	return ptr
}

// allocAligned returns a 64 KiB aligned device address with size usable
// bytes, over-allocating as gdrcopy's tests do.
func allocAligned(t testing.TB, mod *fakegdrdrv.Module, size uint64) uint64 {
	t.Helper()
	ptr := alloc(t, mod, size+gdrdrv.GPUPageSize-1)
	aligned := (ptr + gdrdrv.GPUPageOffset) & gdrdrv.GPUPageMask
	alignedBase.Store(alignedKey{mod, aligned}, ptr)
	return aligned
}

type alignedKey struct {
	mod *fakegdrdrv.Module
	ptr uint64
}

// alignedBase maps the addresses allocAligned returns to their allocation.
var alignedBase sync.Map

// freeAligned simulates cuMemFree of the allocation behind an address from
// allocAligned.
func freeAligned(t testing.TB, mod *fakegdrdrv.Module, aligned uint64) {
	t.Helper()
	base, ok := alignedBase.Load(alignedKey{mod, aligned})
	if !ok {
		t.Fatalf("%#x does not come from allocAligned", aligned)
	}
	if err := mod.Free(base.(uint64)); err != nil {
		t.Fatal(err)
	}
}

func osPageSize() int { return os.Getpagesize() }

// pinMap pins and maps size bytes at ptr.
func pinMap(t testing.TB, d *Driver, ptr, size uint64) (*Buffer, *Mapping) {
	t.Helper()
	b, err := d.Pin(ptr, size, PinDefault)
	if err != nil {
		t.Fatalf("pin: %v", err)
	}
	m, err := b.Map()
	if err != nil {
		t.Fatalf("map: %v", err)
	}
	return b, m
}

// recorder passes calls through to a boundary and records the ioctl
// commands issued.
type recorder struct {
	gdrdrv.Syscalls
	mu   sync.Mutex
	cmds []uint32
}

func (r *recorder) Ioctl(fd int, req uint32, arg unsafe.Pointer) error {
	r.mu.Lock()
	r.cmds = append(r.cmds, req)
	r.mu.Unlock()
	return r.Syscalls.Ioctl(fd, req, arg)
}

func (r *recorder) commands() []uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.cmds)
}
