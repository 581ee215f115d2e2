//go:build !linux

package main

import "github.com/p2pkit/p2pkit/check"

// memlock returns nil: RLIMIT_MEMLOCK is only read on Linux.
func memlock() *check.Rlimit { return nil }

// gdrdrvAccess returns nil: access(2) on /dev/gdrdrv is only asked on Linux.
func gdrdrvAccess() *check.Access { return nil }
