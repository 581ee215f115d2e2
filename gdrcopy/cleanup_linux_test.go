//go:build linux

package gdrcopy

import (
	"bytes"
	"runtime"
	"testing"
	"weak"

	"github.com/p2pkit/p2pkit/gdrcopy/internal/fakegdrdrv"
)

// A slice from Bytes outlives the Driver, Buffer and Mapping it came from,
// all dropped without Close: collecting them must not unmap it (issue #11
// item 9, which crashed with SIGSEGV here). The mapping stays until the
// process ends; the test unmaps it itself, as exit would.
func TestCleanupKeepsBytesMapped(t *testing.T) {
	const size = 64 << 10
	mod := newModule(t, fakegdrdrv.Config{})
	ptr, err := mod.Alloc(2 * size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mod.Free(ptr) })
	aligned := (ptr + size - 1) &^ (size - 1)
	mem, wd, wb, wm := dropMapped(t, mod, aligned, size)

	want := bytes.Repeat([]byte{0x5a}, 4096)
	for i := 0; wd.Value() != nil || wb.Value() != nil || wm.Value() != nil || i < 20; i++ {
		if i == 1000 {
			t.Fatal("the dropped Driver, Buffer and Mapping were not collected in 1000 cycles")
		}
		runtime.GC()
		runtime.Gosched()
		// Touch the slice after every cycle: this faulted once the
		// cleanup had unmapped it.
		want[0] = byte(i)
		copy(mem[i%16*4096:], want)
		if !bytes.Equal(mem[i%16*4096:][:4096], want) {
			t.Fatalf("cycle %d: the slice lost its contents", i)
		}
	}
	copy(mem, "written through the slice")
	got := make([]byte, 25)
	if err := mod.ReadDevice(got, aligned); err != nil {
		t.Fatal(err)
	}
	if string(got) != "written through the slice" {
		t.Errorf("device memory holds %q", got)
	}
	if mod.Stats().Mapped != 1 {
		t.Errorf("module stats %+v: want the mapping kept", mod.Stats())
	}
	if err := mod.Munmap(mem); err != nil {
		t.Fatal(err)
	}
}

// dropMapped opens a driver over mod, pins and maps size bytes at ptr, and
// returns the mapped bytes and weak pointers to the objects, dropped
// without Close.
func dropMapped(t *testing.T, mod *fakegdrdrv.Module, ptr, size uint64) ([]byte, weak.Pointer[Driver], weak.Pointer[Buffer], weak.Pointer[Mapping]) {
	t.Helper()
	d, err := open(mod, fakegdrdrv.DefaultPath)
	if err != nil {
		t.Fatal(err)
	}
	b, m := pinMap(t, d, ptr, size)
	mem := m.Bytes()
	if len(mem) != int(size) {
		t.Fatalf("Bytes() has %d bytes, want %d", len(mem), size)
	}
	return mem, weak.Make(d), weak.Make(b), weak.Make(m)
}
