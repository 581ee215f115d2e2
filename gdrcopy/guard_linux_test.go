//go:build linux

package gdrcopy

import (
	"errors"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/gdrcopy/internal/fakegdrdrv"
)

// Every guarded access leaves the goroutine's panic-on-fault setting as it
// found it, off or on, whether it completes, faults or is refused.
func TestGuardRestoresPanicOnFault(t *testing.T) {
	const size = 64 << 10
	ops := []struct {
		name string
		run  func(m *Mapping, off int) error
	}{
		{"CopyToDevice", func(m *Mapping, off int) error { return m.CopyToDevice(off, make([]byte, 64)) }},
		{"CopyFromDevice", func(m *Mapping, off int) error { return m.CopyFromDevice(make([]byte, 64), off) }},
		{"StoreUint32", func(m *Mapping, off int) error { return m.StoreUint32(off, 1) }},
		{"StoreUint64", func(m *Mapping, off int) error { return m.StoreUint64(off, 1) }},
		{"LoadUint32", func(m *Mapping, off int) error { _, err := m.LoadUint32(off); return err }},
		{"LoadUint64", func(m *Mapping, off int) error { _, err := m.LoadUint64(off); return err }},
	}
	cases := []struct {
		name    string
		off     int
		zap     bool
		wantErr error // nil: no error; errRefused: any error
	}{
		{"completes", 64, false, nil},
		{"faults", 64, true, ErrInvalidated},
		{"refused", size, false, errRefused},
	}
	for _, op := range ops {
		for _, c := range cases {
			for _, before := range []bool{false, true} {
				t.Run(op.name+"/"+c.name+"/"+map[bool]string{false: "off", true: "on"}[before], func(t *testing.T) {
					d, mod := openFake(t, fakegdrdrv.Config{})
					ptr := allocAligned(t, mod, size)
					_, m := pinMap(t, d, ptr, size)
					if c.zap {
						if err := mod.Zap(ptr); err != nil {
							t.Fatal(err)
						}
					}
					// Each subtest runs on its own goroutine; put its
					// setting back all the same.
					defer debug.SetPanicOnFault(debug.SetPanicOnFault(before))
					err := op.run(m, c.off)
					after := debug.SetPanicOnFault(before)
					type result struct {
						Err bool
						POF bool
					}
					want := result{Err: c.wantErr != nil, POF: before}
					if diff := cmp.Diff(want, result{Err: err != nil, POF: after}); diff != "" {
						t.Errorf("err = %v; (-want +got):\n%s", err, diff)
					}
					if c.wantErr != nil && c.wantErr != errRefused && !errors.Is(err, c.wantErr) {
						t.Errorf("err = %v, want %v", err, c.wantErr)
					}
				})
			}
		}
	}
}

// errRefused stands for any error in TestGuardRestoresPanicOnFault.
var errRefused = errors.New("refused")
