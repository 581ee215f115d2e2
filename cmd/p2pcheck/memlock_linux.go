//go:build linux

package main

import (
	"golang.org/x/sys/unix"

	"github.com/p2pkit/p2pkit/check"
)

// memlock returns the process's RLIMIT_MEMLOCK, nil when it cannot be read.
func memlock() *check.Rlimit {
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &l); err != nil {
		return nil
	}
	return &check.Rlimit{Soft: limit(l.Cur), Hard: limit(l.Max)}
}

func limit(v uint64) uint64 {
	if v == unix.RLIM_INFINITY {
		return check.Unlimited
	}
	return v
}
