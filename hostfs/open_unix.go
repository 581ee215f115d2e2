//go:build unix

package hostfs

import (
	"os"
	"syscall"
)

// openFlags opens attribute files without blocking on a FIFO and without acquiring a
// controlling terminal.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY
