package ordertest

import (
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"testing"
)

// memory is a Device over ordinary memory whose stores of data can be held
// back until the next copy, as a write-combining buffer that nothing drains
// holds them.
type memory struct {
	data, words []byte
	held        func()
}

func newMemory(n int, holdData bool) Device {
	m := &memory{data: make([]byte, n), words: make([]byte, 16)}
	return Device{
		Len: n,
		CopyTo: func(off int, src []byte) error {
			if m.held != nil {
				m.held()
				m.held = nil
			}
			buf := append([]byte(nil), src...)
			land := func() { copy(m.data[off:], buf) }
			if holdData {
				m.held = land
			} else {
				land()
			}
			return nil
		},
		CopyFrom: func(dst []byte, off int) error { copy(dst, m.data[off:]); return nil },
		Store:    func(i int, v uint64) error { binary.NativeEndian.PutUint64(m.words[8*i:], v); return nil },
		Load:     func(i int) (uint64, error) { return binary.NativeEndian.Uint64(m.words[8*i:]), nil },
	}
}

// locked makes a Device of memory safe for the harness's two goroutines: it
// serializes every call, so that only the hold-back above reorders anything.
func locked(d Device) Device {
	var mu sync.Mutex
	lock := func() func() { mu.Lock(); return mu.Unlock }
	return Device{
		Len:      d.Len,
		CopyTo:   func(off int, src []byte) error { defer lock()(); return d.CopyTo(off, src) },
		CopyFrom: func(dst []byte, off int) error { defer lock()(); return d.CopyFrom(dst, off) },
		Store:    func(i int, v uint64) error { defer lock()(); return d.Store(i, v) },
		Load:     func(i int) (uint64, error) { defer lock()(); return d.Load(i) },
	}
}

func TestRunPasses(t *testing.T) {
	d := newMemory(1<<17, false)
	if err := Run(locked(d), 200); err != nil {
		t.Fatal(err)
	}
}

// TestRunCatchesLateData checks that the harness sees data that reaches the
// device after its flag.
func TestRunCatchesLateData(t *testing.T) {
	d := newMemory(1<<17, true)
	err := Run(locked(d), 200)
	if err == nil || !strings.Contains(err.Error(), "the data of another round") {
		t.Fatalf("Run = %v, want the consumer to see another round's data", err)
	}
}

// TestRunReportsErrors checks that an error of the functions under test
// stops both sides and is returned.
func TestRunReportsErrors(t *testing.T) {
	d := newMemory(1<<17, false)
	boom := errors.New("boom")
	d.CopyFrom = func([]byte, int) error { return boom }
	if err := Run(locked(d), 200); !errors.Is(err, boom) {
		t.Fatalf("Run = %v, want %v", err, boom)
	}
}
