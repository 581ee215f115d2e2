//go:build linux

package main

import (
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPinThread checks that pinThread leaves its thread on the one CPU, and
// that unpin gives the thread its CPUs back.
func TestPinThread(t *testing.T) {
	runtime.LockOSThread() // so that both looks below see the thread pinThread pins
	defer runtime.UnlockOSThread()
	before, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	cpu := before[len(before)-1]
	unpin, err := pinThread(cpu)
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if err := unpin(); err != nil {
		t.Fatal(err)
	}
	after, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pinned, []int{cpu}) || !slices.Equal(after, before) {
		t.Errorf("CPUs before %v, pinned %v (want [%d]), after %v", before, pinned, cpu, after)
	}
	var none unix.CPUSet
	if _, err := pinThread(1 << 20); err == nil {
		t.Error("pinThread of a CPU past any set: no error")
	} else if unix.SchedGetaffinity(0, &none) == nil && none.Count() != len(before) {
		t.Errorf("a failed pinThread left the thread on %d CPUs, want %d", none.Count(), len(before))
	}
}
