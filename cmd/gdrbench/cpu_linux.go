//go:build linux

package main

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// allowedCPUs returns the CPUs the calling thread may run on, in order
// (sched_getaffinity(2)); before any pinning that is the process's set.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var cpus []int
	for cpu := 0; len(cpus) < set.Count(); cpu++ {
		if set.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	return cpus, nil
}

// pinThread locks the calling goroutine to its thread and lets that thread
// run on cpu only, so that it times copies there while the Go runtime's
// other threads stay where they were allowed. Threads the runtime starts
// later do not inherit the pinning: it starts them from a thread of its
// own when the one asking is locked (runtime.LockOSThread's documentation
// and newm in runtime/proc.go). unpin gives the thread its set back and
// unlocks it.
func pinThread(cpu int) (unpin func() error, err error) {
	runtime.LockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var one unix.CPUSet
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("run on CPU %d: sched_setaffinity: %w", cpu, err)
	}
	return func() error {
		err := unix.SchedSetaffinity(0, &old)
		if err != nil {
			// A thread left pinned must not run other goroutines: keep it
			// locked, so that it ends with the goroutine.
			return fmt.Errorf("sched_setaffinity back: %w", err)
		}
		runtime.UnlockOSThread()
		return nil
	}, nil
}
