//go:build linux

package main

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"

	"github.com/p2pkit/p2pkit/check"
)

// Live-process facts read with Linux system calls.

// memlock returns the process's RLIMIT_MEMLOCK, nil when it cannot be read.
func memlock() *check.Rlimit {
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &l); err != nil {
		return nil
	}
	return &check.Rlimit{Soft: limit(l.Cur), Hard: limit(l.Max)}
}

// gdrdrvAccess asks the kernel whether this process may open /dev/gdrdrv for
// reading and writing; nil when there is no such node.
func gdrdrvAccess() *check.Access {
	err := unix.Access("/dev/gdrdrv", unix.R_OK|unix.W_OK)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return &check.Access{UID: os.Geteuid(), ReadWrite: err == nil}
}

func limit(v uint64) uint64 {
	if v == unix.RLIM_INFINITY {
		return check.Unlimited
	}
	return v
}
