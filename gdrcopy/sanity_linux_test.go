//go:build linux

package gdrcopy

// The cases of GDRCopy's tests/sanity.cpp (gdrcopy_sanity), run against the
// fake gdrdrv. Names follow the C tests.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/gdrcopy/internal/fakegdrdrv"
	"github.com/p2pkit/p2pkit/gdrcopy/internal/gdrdrv"
)

// basic_*: pin and unpin 256 KiB + 16 bytes, rounded to GPU pages, on every
// driver version and in both pinning modes.
func TestSanityBasic(t *testing.T) {
	const size = 256<<10 + 16
	for _, v := range allVersions {
		for _, persistent := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/persistent=%t", v, persistent), func(t *testing.T) {
				d, mod := openFake(t, fakegdrdrv.Config{Version: uint32(v), Persistent: persistent})
				if d.Version() != v {
					t.Errorf("Version() = %s, want %s", d.Version(), v)
				}
				ptr := allocAligned(t, mod, size)
				b, err := d.Pin(ptr, size, PinDefault)
				if err != nil {
					t.Fatalf("pin: %v", err)
				}
				info, err := b.Info()
				if err != nil {
					t.Fatal(err)
				}
				want := Info{VA: ptr, MappedSize: 320 << 10, PageSize: 65536, Mapping: MappingNone}
				if diff := cmp.Diff(want, info); diff != "" {
					t.Errorf("Info() (-want +got):\n%s", diff)
				}
				if err := b.Close(); err != nil {
					t.Fatalf("unpin: %v", err)
				}
				if got := mod.Stats().Pinned; got != 0 {
					t.Errorf("after unpin the module holds %d pins", got)
				}
			})
		}
	}
}

// Handles start at 0, advance by the pinned pages and are never reused
// (gdrdrv.c gdr_generate_mr_handle); mmap offsets follow them.
func TestSanityHandles(t *testing.T) {
	d, mod := openFake(t, fakegdrdrv.Config{})
	ptr := allocAligned(t, mod, 3*gdrdrv.GPUPageSize)
	pages := gdrdrv.GPUPageSize >> gdrdrv.PageShift(osPageSize())
	var got []uint64
	for range 3 {
		b, err := d.Pin(ptr, gdrdrv.GPUPageSize, PinDefault)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, b.handle)
		if _, err := b.Map(); err != nil {
			t.Fatalf("map handle %d: %v", b.handle, err)
		}
		if len(got) == 1 {
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := []uint64{0, pages, 2 * pages}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("handles (-want +got):\n%s", diff)
	}
}

// basic_unaligned_mapping: an unaligned allocation pins but does not map;
// its 64 KiB aligned part maps; freeing an allocation that shares the
// first page must not break that mapping.
func TestSanityUnalignedMapping(t *testing.T) {
	d, mod := openFake(t, fakegdrdrv.Config{})
	fa := alloc(t, mod, 4)
	const aSize = gdrdrv.GPUPageSize + 4
	a := alloc(t, mod, aSize)
	if a&gdrdrv.GPUPageOffset == 0 {
		t.Fatalf("second allocation %#x is aligned; the test needs it not to be", a)
	}

	b, err := d.Pin(a, aSize, PinDefault)
	if err != nil {
		t.Fatalf("pin unaligned: %v", err)
	}
	if _, err := b.Map(); !errors.Is(err, ErrUnaligned) {
		t.Errorf("map unaligned: err = %v, want ErrUnaligned", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	aligned := (a + gdrdrv.GPUPageOffset) & gdrdrv.GPUPageMask
	_, m := pinMap(t, d, aligned, aSize-(aligned-a))
	if err := m.CopyToDevice(0, le32(7)); err != nil {
		t.Fatal(err)
	}

	_, mfa := pinMap(t, d, fa, 4)
	if err := mod.Free(fa); err != nil {
		t.Fatal(err)
	}
	if err := m.CopyToDevice(0, le32(9)); err != nil {
		t.Fatalf("write after freeing the neighbour: %v", err)
	}
	got := make([]byte, 4)
	if err := mod.ReadDevice(got, aligned); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, le32(9)) {
		t.Errorf("device holds %v, want 9", got)
	}
	// The neighbour's own mapping is gone in non-persistent mode.
	if err := mfa.CopyToDevice(0, le32(1)); !errors.Is(err, ErrInvalidated) {
		t.Errorf("write to the freed neighbour: err = %v, want ErrInvalidated", err)
	}
}

// basic_small_buffers_mapping (issue #244): two small buffers in one GPU
// page; the first maps, the second does not.
func TestSanitySmallBuffersMapping(t *testing.T) {
	d, mod := openFake(t, fakegdrdrv.Config{})
	first := alloc(t, mod, 8)
	second := alloc(t, mod, 8)
	if first&gdrdrv.GPUPageOffset != 0 || second&gdrdrv.GPUPageMask != first {
		t.Fatalf("allocations %#x, %#x do not share an aligned GPU page", first, second)
	}
	pinMap(t, d, first, 8)
	b, err := d.Pin(second, 8, PinDefault)
	if err != nil {
		t.Fatalf("pin second: %v", err)
	}
	if _, err := b.Map(); !errors.Is(err, ErrUnaligned) {
		t.Errorf("map second: err = %v, want ErrUnaligned", err)
	}
}

// data_validation_*: copies at odd offsets on the mapping side, the host
// side and both, checked against the device contents read without the
// mapping (cuMemcpyDtoH in the C test).
func TestSanityDataValidation(t *testing.T) {
	const size = 256 << 10
	offsets := []int{1, 2, 3, 4, 5, 6, 7, 11, 129, 1023}
	for _, v := range allVersions {
		t.Run(v.String(), func(t *testing.T) {
			d, mod := openFake(t, fakegdrdrv.Config{Version: uint32(v)})
			ptr := allocAligned(t, mod, size)
			_, m := pinMap(t, d, ptr, size)
			src := rand.NewChaCha8([32]byte{byte(v)})
			rng := rand.New(src)
			host := make([]byte, size)
			device := make([]byte, size)

			// CPU writes through the mapping, read back by the device.
			for i := range 1000 {
				off := rng.IntN(size/4) * 4
				if _, err := m.WriteAt(le32(uint32(i)), int64(off)); err != nil {
					t.Fatal(err)
				}
				copy(host[off:], le32(uint32(i)))
			}
			if err := mod.ReadDevice(device, ptr); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(host, device) {
				t.Fatal("device memory differs from the CPU writes through the mapping")
			}

			for _, unit := range []int{1, 4} { // bytes and dwords
				for _, o := range offsets {
					o *= unit
					for _, side := range []struct {
						name         string
						mapOff, hOff int
					}{{"mapping", o, 0}, {"host", 0, o}, {"both", o, o}} {
						n := size - max(side.mapOff, side.hOff)
						src.Read(host)
						if err := m.CopyToDevice(side.mapOff, host[side.hOff:side.hOff+n]); err != nil {
							t.Fatal(err)
						}
						if err := mod.ReadDevice(device, ptr); err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(device[side.mapOff:side.mapOff+n], host[side.hOff:side.hOff+n]) {
							t.Errorf("to device, offset %d on the %s side: data differ", o, side.name)
						}
						src.Read(device)
						if err := mod.WriteDevice(ptr, device); err != nil {
							t.Fatal(err)
						}
						clear(host)
						if err := m.CopyFromDevice(host[side.hOff:side.hOff+n], side.mapOff); err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(host[side.hOff:side.hOff+n], device[side.mapOff:side.mapOff+n]) {
							t.Errorf("from device, offset %d on the %s side: data differ", o, side.name)
						}
					}
				}
			}
		})
	}
}

// data_validation_mix_mappings_cumemalloc: one buffer pinned twice, mapped
// write-combining and caching on a coherent platform, sees the same data
// through both.
func TestSanityDataValidationMixMappings(t *testing.T) {
	const size = 64 << 10
	d, mod := openFake(t, fakegdrdrv.Config{Cacheable: true})
	ptr := allocAligned(t, mod, size)
	var maps []*Mapping
	for _, typ := range []MappingType{MappingWC, MappingCaching} {
		b, err := d.Pin(ptr, size, PinDefault)
		if err != nil {
			t.Fatal(err)
		}
		m, err := b.MapAs(typ)
		if err != nil {
			t.Fatalf("map as %s: %v", typ, err)
		}
		maps = append(maps, m)
	}
	src := rand.NewChaCha8([32]byte{7})
	want := make([]byte, size)
	got := make([]byte, size)
	for i, m := range maps {
		other := maps[1-i]
		src.Read(want)
		if err := m.CopyToDevice(0, want); err != nil {
			t.Fatal(err)
		}
		if err := other.CopyFromDevice(got, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("written through the %s mapping, read through the %s one: data differ", m.Type(), other.Type())
		}
	}
}

// invalidation_access_after_free_* and invalidation_two_mappings_*: in
// non-persistent mode freeing the memory invalidates the pin and its
// mapping only; in persistent mode the old data stay readable.
func TestSanityInvalidationAfterFree(t *testing.T) {
	const size = 64 << 10
	t.Run("non-persistent/fault", func(t *testing.T) {
		d, mod := openFake(t, fakegdrdrv.Config{})
		a := allocAligned(t, mod, size)
		bb := allocAligned(t, mod, size)
		bufA, mA := pinMap(t, d, a, size)
		_, mB := pinMap(t, d, bb, size)
		if err := mA.CopyToDevice(0, le32(1)); err != nil {
			t.Fatal(err)
		}
		freeAligned(t, mod, a)
		// The copy touches the zapped mapping, faults, and reports it.
		if err := mA.CopyToDevice(0, le32(2)); !errors.Is(err, ErrInvalidated) {
			t.Errorf("write after free: err = %v, want ErrInvalidated", err)
		}
		if err := mA.CopyFromDevice(make([]byte, 4), 0); !errors.Is(err, ErrInvalidated) {
			t.Errorf("read after free: err = %v, want ErrInvalidated", err)
		}
		if inv, err := bufA.Invalidated(); err != nil || !inv {
			t.Errorf("Invalidated() = %t, %v; want true", inv, err)
		}
		// The other mapping is untouched.
		if err := mB.CopyToDevice(0, le32(3)); err != nil {
			t.Errorf("write to the other mapping: %v", err)
		}
		// Remapping the invalidated buffer is refused by the driver.
		if err := mA.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := bufA.Map(); !errors.Is(err, ErrInvalidated) {
			t.Errorf("map after free: err = %v, want ErrInvalidated", err)
		}
	})
	// The fault is caught whichever kernel touches the zapped mapping first:
	// the small aligned accesses, the streaming bulk in both directions, and
	// the plain copy of caching mappings.
	t.Run("non-persistent/fault in every kernel", func(t *testing.T) {
		for _, cached := range []bool{false, true} {
			d, mod := openFake(t, fakegdrdrv.Config{Cacheable: cached})
			for _, n := range []int{1, 4, 15, 100, 4096 + 3, size} {
				for _, dir := range []string{"to", "from"} {
					a := allocAligned(t, mod, size)
					_, m := pinMap(t, d, a, size)
					freeAligned(t, mod, a)
					buf := make([]byte, n)
					var err error
					if dir == "to" {
						err = m.CopyToDevice(size-n, buf)
					} else {
						err = m.CopyFromDevice(buf, size-n)
					}
					if !errors.Is(err, ErrInvalidated) {
						t.Errorf("%s mapping, copy %s device of %d bytes after free: err = %v, want ErrInvalidated", m.Type(), dir, n, err)
					}
				}
			}
		}
	})
	t.Run("non-persistent/flag", func(t *testing.T) {
		d, mod := openFake(t, fakegdrdrv.Config{})
		a := allocAligned(t, mod, size)
		b, m := pinMap(t, d, a, size)
		freeAligned(t, mod, a)
		if inv, err := b.Invalidated(); err != nil || !inv {
			t.Fatalf("Invalidated() = %t, %v; want true", inv, err)
		}
		// Known invalid: the copy fails without touching the mapping.
		if err := m.CopyToDevice(0, le32(2)); !errors.Is(err, ErrInvalidated) {
			t.Errorf("write after free: err = %v, want ErrInvalidated", err)
		}
	})
	t.Run("persistent", func(t *testing.T) {
		d, mod := openFake(t, fakegdrdrv.Config{Persistent: true})
		a := allocAligned(t, mod, size)
		b, m := pinMap(t, d, a, size)
		if err := m.CopyToDevice(0, le32(42)); err != nil {
			t.Fatal(err)
		}
		freeAligned(t, mod, a)
		if inv, err := b.Invalidated(); err != nil || inv {
			t.Errorf("Invalidated() = %t, %v; want false", inv, err)
		}
		got := make([]byte, 4)
		if err := m.CopyFromDevice(got, 0); err != nil {
			t.Fatalf("read after free: %v", err)
		}
		if !bytes.Equal(got, le32(42)) {
			t.Errorf("read after free = %v, want the old data 42", got)
		}
	})
}

// invalidation_access_after_gdr_close_*: where libgdrapi leaves the
// mapping to fault, every use after Close here returns an error.
func TestSanityAccessAfterClose(t *testing.T) {
	const size = 64 << 10
	d, mod := openFake(t, fakegdrdrv.Config{})
	ptr := allocAligned(t, mod, size)
	b, m := pinMap(t, d, ptr, size)
	b2, m2 := pinMap(t, d, allocAligned(t, mod, size), size)

	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	checkClosed := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, fs.ErrClosed) {
			t.Errorf("%s: err = %v, want fs.ErrClosed", what, err)
		}
	}
	checkClosed("copy to closed mapping", m.CopyToDevice(0, []byte{1}))
	checkClosed("copy from closed mapping", m.CopyFromDevice([]byte{1}, 0))
	_, err := m.WriteAt([]byte{1}, 0)
	checkClosed("WriteAt closed mapping", err)
	if m.Bytes() != nil || m.Len() != 0 {
		t.Errorf("closed mapping: Bytes() has %d bytes, Len() = %d", len(m.Bytes()), m.Len())
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close of mapping: %v", err)
	}
	// The buffer may be mapped again.
	m, err = b.Map()
	if err != nil {
		t.Fatalf("remap: %v", err)
	}
	if _, err := b.Map(); err == nil {
		t.Error("a second mapping of one buffer succeeded")
	}

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	checkClosed("copy after buffer close", m.CopyToDevice(0, []byte{1}))
	_, err = b.Info()
	checkClosed("Info after buffer close", err)
	_, err = b.Map()
	checkClosed("Map after buffer close", err)
	_, err = b.Invalidated()
	checkClosed("Invalidated after buffer close", err)
	if err := b.Close(); err != nil {
		t.Errorf("second Close of buffer: %v", err)
	}

	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	checkClosed("copy after driver close", m2.CopyToDevice(0, []byte{1}))
	_, err = b2.Info()
	checkClosed("Info after driver close", err)
	_, err = d.Pin(ptr, size, PinDefault)
	checkClosed("Pin after driver close", err)
	_, err = d.Attributes()
	checkClosed("Attributes after driver close", err)
	if err := d.Close(); err != nil {
		t.Errorf("second Close of driver: %v", err)
	}
	if diff := cmp.Diff(fakegdrdrv.Stats{}, mod.Stats()); diff != "" {
		t.Errorf("driver close left resources (-want +got):\n%s", diff)
	}
}

// attributes_sanity: GET_ATTR for both attributes, and their absence before
// gdrdrv 2.5.
func TestSanityAttributes(t *testing.T) {
	tests := []struct {
		cfg  fakegdrdrv.Config
		want Attributes
	}{
		{fakegdrdrv.Config{}, Attributes{}},
		{fakegdrdrv.Config{Persistent: true}, Attributes{PersistentMapping: true}},
		{fakegdrdrv.Config{Persistent: true, ForcePCIe: true}, Attributes{PersistentMapping: true, ForcePCIe: true}},
		{fakegdrdrv.Config{ForcePCIe: true}, Attributes{}}, // FORCE_PCIE needs persistent mode
		{fakegdrdrv.Config{Version: uint32(v2_5), Persistent: true}, Attributes{PersistentMapping: true}},
		{fakegdrdrv.Config{Version: uint32(v2_4), Persistent: true, ForcePCIe: true}, Attributes{}}, // no GET_ATTR
		{fakegdrdrv.Config{Version: uint32(v2_0), Persistent: true}, Attributes{}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%+v", tt.cfg), func(t *testing.T) {
			d, _ := openFake(t, tt.cfg)
			got, err := d.Attributes()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Attributes() (-want +got):\n%s", diff)
			}
		})
	}
}

func le32(v uint32) []byte {
	return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)}
}
