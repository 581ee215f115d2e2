//go:build !linux

package gdrcopy

import (
	"fmt"
	"runtime"

	"github.com/p2pkit/p2pkit/gdrcopy/internal/gdrdrv"
)

// hostSyscalls reports that gdrdrv exists only on Linux.
func hostSyscalls() (gdrdrv.Syscalls, error) {
	return nil, fmt.Errorf("%w on %s: gdrdrv is a Linux kernel module", ErrNotSupported, runtime.GOOS)
}
