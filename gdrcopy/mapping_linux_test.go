//go:build linux

package gdrcopy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"sync"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/gdrcopy/internal/fakegdrdrv"
	"github.com/p2pkit/p2pkit/gdrcopy/internal/wccopy"
)

func TestMappingBounds(t *testing.T) {
	const size = 1000
	d, mod := openFake(t, fakegdrdrv.Config{})
	_, m := pinMap(t, d, allocAligned(t, mod, size), size)

	copyTests := []struct {
		off, n int
		ok     bool
	}{
		{0, size, true},
		{size, 0, true},
		{size - 1, 1, true},
		{0, size + 1, false},
		{size, 1, false},
		{size + 1, 0, false},
		{-1, 1, false},
		{math.MaxInt, 1, false},
		{1, math.MaxInt, false},
	}
	for _, tt := range copyTests {
		t.Run(fmt.Sprintf("copy/%d+%d", tt.off, tt.n), func(t *testing.T) {
			n := min(tt.n, size+1) // the checks must not depend on the buffer
			if tt.n == math.MaxInt {
				// A huge length cannot be allocated; check it as a slice
				// header only, which is all the bounds check reads.
				n = size + 1
			}
			buf := make([]byte, n)
			errTo := m.CopyToDevice(tt.off, buf)
			errFrom := m.CopyFromDevice(buf, tt.off)
			if (errTo == nil) != tt.ok || (errFrom == nil) != tt.ok {
				t.Errorf("to device: %v, from device: %v; want success %t", errTo, errFrom, tt.ok)
			}
		})
	}

	readTests := []struct {
		off   int64
		n     int
		wantN int
		want  error
	}{
		{0, size, size, nil},
		{990, 10, 10, nil},
		{990, 20, 10, io.EOF},
		{size, 1, 0, io.EOF},
		{size, 0, 0, nil},
		{size + 5, 1, 0, io.EOF},
		{math.MaxInt64, 1, 0, io.EOF},
	}
	for _, tt := range readTests {
		t.Run(fmt.Sprintf("ReadAt/%d+%d", tt.off, tt.n), func(t *testing.T) {
			n, err := m.ReadAt(make([]byte, tt.n), tt.off)
			if n != tt.wantN || !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("ReadAt = %d, %v; want %d, %v", n, err, tt.wantN, tt.want)
			}
		})
	}
	if n, err := m.ReadAt(make([]byte, 1), -1); n != 0 || err == nil {
		t.Errorf("ReadAt at -1 = %d, %v; want an error", n, err)
	}

	writeTests := []struct {
		off int64
		n   int
		ok  bool
	}{
		{0, size, true},
		{990, 10, true},
		{990, 11, false},
		{-1, 1, false},
		{math.MaxInt64, 1, false},
	}
	for _, tt := range writeTests {
		t.Run(fmt.Sprintf("WriteAt/%d+%d", tt.off, tt.n), func(t *testing.T) {
			n, err := m.WriteAt(make([]byte, tt.n), tt.off)
			if (err == nil) != tt.ok || (tt.ok && n != tt.n) || (!tt.ok && n != 0) {
				t.Errorf("WriteAt = %d, %v; want success %t", n, err, tt.ok)
			}
		})
	}
}

// The mapping works as an io.ReaderAt and io.WriterAt for the standard
// library.
func TestMappingSectionReader(t *testing.T) {
	const size = 5000
	d, mod := openFake(t, fakegdrdrv.Config{})
	_, m := pinMap(t, d, allocAligned(t, mod, size), size)
	want := bytes.Repeat([]byte("0123456789"), size/10)
	w := io.NewOffsetWriter(m, 0)
	if _, err := io.Copy(w, bytes.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(io.NewSectionReader(m, 0, math.MaxInt64))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("data read through a SectionReader differ from those written")
	}
}

// Copies on distinct mappings, and on one mapping, run in parallel (run
// with -race).
func TestParallelCopies(t *testing.T) {
	const (
		size    = 64 << 10
		workers = 8
		rounds  = 50
	)
	d, mod := openFake(t, fakegdrdrv.Config{})
	shared := pinMapped(t, d, mod, size)
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers)
	for w := range workers {
		own := pinMapped(t, d, mod, size)
		wg.Go(func() {
			pattern := bytes.Repeat([]byte{byte(w + 1)}, size)
			got := make([]byte, size)
			for range rounds {
				if err := own.CopyToDevice(0, pattern); err != nil {
					errs <- err
					return
				}
				if err := own.CopyFromDevice(got, 0); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, pattern) {
					errs <- fmt.Errorf("worker %d read back another worker's data", w)
					return
				}
			}
		})
		wg.Go(func() {
			// Each worker owns one slot of the shared mapping.
			slot := size / workers
			pattern := bytes.Repeat([]byte{byte(w + 1)}, slot)
			got := make([]byte, slot)
			for range rounds {
				if err := shared.CopyToDevice(w*slot, pattern); err != nil {
					errs <- err
					return
				}
				if err := shared.CopyFromDevice(got, w*slot); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, pattern) {
					errs <- fmt.Errorf("worker %d: its slot of the shared mapping was overwritten", w)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Closing a mapping, buffer or driver while copies run is safe: each copy
// either completes or fails with fs.ErrClosed (run with -race).
func TestCloseRacesCopies(t *testing.T) {
	const size = 64 << 10
	for _, victim := range []string{"mapping", "buffer", "driver"} {
		t.Run(victim, func(t *testing.T) {
			d, mod := openFake(t, fakegdrdrv.Config{})
			ptr := allocAligned(t, mod, size)
			b, m := pinMap(t, d, ptr, size)
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			started := make(chan struct{}, 4)
			for range 4 {
				wg.Go(func() {
					buf := make([]byte, size)
					for i := 0; ; i++ {
						var err error
						if i%2 == 0 {
							err = m.CopyToDevice(0, buf)
						} else {
							_, err = m.ReadAt(buf, 0)
						}
						if i == 0 {
							started <- struct{}{}
						}
						if errors.Is(err, fs.ErrClosed) {
							return
						}
						if err != nil {
							errs <- err
							return
						}
					}
				})
			}
			for range 4 {
				<-started
			}
			var err error
			switch victim {
			case "mapping":
				err = m.Close()
			case "buffer":
				err = b.Close()
			case "driver":
				err = d.Close()
			}
			if err != nil {
				t.Error(err)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("copy racing with close: %v", err)
			}
		})
	}
}

// Closes racing with each other release everything exactly once.
func TestConcurrentCloses(t *testing.T) {
	d, mod := openFake(t, fakegdrdrv.Config{})
	type pair struct {
		b *Buffer
		m *Mapping
	}
	var pairs []pair
	for range 8 {
		b, m := pinMap(t, d, allocAligned(t, mod, 64<<10), 64<<10)
		pairs = append(pairs, pair{b, m})
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3*len(pairs)+1)
	for _, p := range pairs {
		wg.Go(func() { errs <- p.m.Close() })
		wg.Go(func() { errs <- p.b.Close() })
		wg.Go(func() { _, err := p.b.Info(); errs <- ignoreClosed(err) })
	}
	wg.Go(func() { errs <- d.Close() })
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if diff := cmp.Diff(fakegdrdrv.Stats{}, mod.Stats()); diff != "" {
		t.Errorf("after concurrent closes (-want +got):\n%s", diff)
	}
}

func ignoreClosed(err error) error {
	if errors.Is(err, fs.ErrClosed) {
		return nil
	}
	return err
}

func pinMapped(t *testing.T, d *Driver, mod *fakegdrdrv.Module, size uint64) *Mapping {
	t.Helper()
	_, m := pinMap(t, d, allocAligned(t, mod, size), size)
	return m
}

// The cost of a copy through a Mapping over the kernel alone: the state
// load, the bounds check and the fault handling (a fault guard where the
// kernels do not return their faults). "kernel" runs the kernel on the
// persistent mapping and "kernel-nonpersistent" on the non-persistent one,
// with the same bytes at the same offset as the API paths beside them.
// store64 and load64 measure StoreUint64 and LoadUint64 against their
// kernels. The fake's mapping is ordinary memory, so the numbers say
// nothing about PCIe; compare the paths of one size with benchstat.
func BenchmarkCopy(b *testing.B) {
	const size = 64 << 10
	d, mod := openFake(b, fakegdrdrv.Config{})
	_, m := pinMap(b, d, allocAligned(b, mod, size), size)
	dp, modp := openFake(b, fakegdrdrv.Config{Persistent: true})
	_, mp := pinMap(b, dp, allocAligned(b, modp, size), size)
	b.Run("store64/kernel", func(b *testing.B) {
		p := (*uint64)(unsafe.Pointer(unsafe.SliceData(mp.mem)))
		for b.Loop() {
			wccopy.Store64(p, 1)
		}
	})
	b.Run("store64/persistent", func(b *testing.B) {
		for b.Loop() {
			if err := mp.StoreUint64(0, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("load64/kernel", func(b *testing.B) {
		p := (*uint64)(unsafe.Pointer(unsafe.SliceData(mp.mem)))
		for b.Loop() {
			wccopy.Load64(p)
		}
	})
	b.Run("load64/persistent", func(b *testing.B) {
		for b.Loop() {
			if _, err := mp.LoadUint64(0); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The two mappings are different pages, and a streaming store to
	// ordinary memory (MOVDIR64B above all) costs what its page costs.
	// Every buffer is written first: a page never written reads as the
	// kernel's shared zero page.
	fill := bytes.Repeat([]byte{0x5a}, size)
	copy(m.mem, fill)
	copy(mp.mem, fill)
	for _, n := range []int{8, 64, 4096, size} {
		buf := bytes.Repeat([]byte{0xa5}, n)
		for _, p := range []struct {
			name string
			to   func() error
			from func() error
		}{
			{"kernel", func() error { wccopy.ToDevice(mp.mem[:n], buf); return nil },
				func() error { wccopy.FromDevice(buf, mp.mem[:n]); return nil }},
			{"persistent", func() error { return mp.CopyToDevice(0, buf) },
				func() error { return mp.CopyFromDevice(buf, 0) }},
			{"kernel-nonpersistent", func() error { wccopy.ToDevice(m.mem[:n], buf); return nil },
				func() error { wccopy.FromDevice(buf, m.mem[:n]); return nil }},
			{"nonpersistent", func() error { return m.CopyToDevice(0, buf) },
				func() error { return m.CopyFromDevice(buf, 0) }},
		} {
			for _, dir := range []string{"to", "from"} {
				fn := p.to
				if dir == "from" {
					fn = p.from
				}
				b.Run(fmt.Sprintf("%s/%d/%s", dir, n, p.name), func(b *testing.B) {
					b.SetBytes(int64(n))
					for b.Loop() {
						if err := fn(); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
