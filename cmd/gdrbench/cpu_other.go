//go:build !linux

package main

import (
	"errors"
	"fmt"
)

// allowedCPUs needs sched_getaffinity, which only Linux has.
func allowedCPUs() ([]int, error) { return nil, errNoCPUs }

// pinThread needs sched_setaffinity, which only Linux has.
func pinThread(cpu int) (func() error, error) {
	return nil, fmt.Errorf("run on CPU %d: %w", cpu, errNoCPUs)
}

// errNoCPUs is allowedCPUs' answer where there is no sched_getaffinity.
var errNoCPUs = errors.New("no CPU affinity on this system")
