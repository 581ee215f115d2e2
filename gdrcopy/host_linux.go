//go:build linux

package gdrcopy

import "github.com/p2pkit/p2pkit/gdrcopy/internal/gdrdrv"

// hostSyscalls returns the boundary that reaches the kernel.
func hostSyscalls() (gdrdrv.Syscalls, error) {
	return gdrdrv.Host, nil
}
