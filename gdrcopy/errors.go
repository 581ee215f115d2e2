package gdrcopy

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/p2pkit/p2pkit/internal/gdrready"
)

var (
	// ErrNotSupported means the platform, the driver version or the build
	// cannot do what was asked.
	ErrNotSupported = errors.New("gdrcopy: not supported")

	// ErrDriverNotLoaded means /dev/gdrdrv is missing or no gdrdrv module
	// serves it. The error text says how to fix it.
	ErrDriverNotLoaded = errors.New("gdrcopy: gdrdrv is not loaded")

	// ErrUnaligned means a buffer cannot be mapped because the pinned
	// address is not 64 KiB aligned (see the package documentation).
	ErrUnaligned = errors.New("gdrcopy: pinned address is not 64 KiB aligned")

	// ErrInvalidated means the GPU memory behind a buffer was freed while it
	// was pinned, and gdrdrv tore down its mapping.
	ErrInvalidated = errors.New("gdrcopy: GPU memory was freed while pinned")

	// ErrFault means an access to a mapping faulted where the driver should
	// never have torn it down (persistent mode, or a DMA-BUF mapping): the
	// mapping is unusable, and copies through it keep failing.
	ErrFault = errors.New("gdrcopy: access to the mapping faulted")

	// ErrForeignProcess means the descriptor of /dev/gdrdrv belongs to
	// another process: gdrdrv serves only the process that opened it.
	ErrForeignProcess = errors.New("gdrcopy: gdrdrv descriptor belongs to another process")
)

// Fix texts for the ways opening the node fails, from package gdrready, which
// p2pcheck and gdrbench use too. The node is made by GDRCopy's packaged service,
// modprobe rule or insmod.sh, never by udev, because the module registers a
// dynamic major and no device class.
const (
	fixNoNode = gdrready.FixLoad + "; if grep gdrdrv /proc/devices shows the module but the node is missing: " +
		"mknod -m 666 /dev/gdrdrv c <major> 0 with that major; " + gdrready.FixContainer + "; " + gdrready.FixDMABuf
	fixStaleNode  = gdrready.FixStale
	fixPermission = gdrready.FixPermission
	fixNotGDRDrv  = gdrready.FixNotGDRDrv
)

// openError explains a failed open(2) of the node.
func openError(path string, err error) error {
	switch {
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("%w: open %s: %w; %s", ErrDriverNotLoaded, path, err, fixNoNode)
	case errors.Is(err, syscall.ENXIO), errors.Is(err, syscall.ENODEV):
		return fmt.Errorf("%w: open %s: %w; %s", ErrDriverNotLoaded, path, err, fixStaleNode)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("gdrcopy: open %s: %w; %s", path, err, fixPermission)
	default:
		return fmt.Errorf("gdrcopy: open %s: %w", path, err)
	}
}

// versionError explains a failed GET_VERSION.
func versionError(path string, err error) error {
	switch {
	case errors.Is(err, syscall.EINVAL):
		return fmt.Errorf("%w: %s: get version: %w; %s", ErrDriverNotLoaded, path, err, fixNotGDRDrv)
	case errors.Is(err, syscall.ENOTTY):
		return fmt.Errorf("%w: %s: get version: %w; %s", ErrNotSupported, path, err, fixNotGDRDrv)
	default:
		return driverError(path+": get version", err)
	}
}

// driverError wraps an errno from an ioctl or mmap of gdrdrv. EACCES from a
// descriptor this process opened means another process is using it
// (gdrdrv.c gdrdrv_check_same_process); ENOTTY means the module lacks the
// command.
func driverError(op string, err error) error {
	switch {
	case errors.Is(err, syscall.EACCES):
		return fmt.Errorf("%w: %s: %w; gdrdrv serves only the process that opened /dev/gdrdrv, "+
			"so a descriptor inherited across fork or received over SCM_RIGHTS cannot be used: open the device in this process",
			ErrForeignProcess, op, err)
	case errors.Is(err, syscall.ENOTTY):
		return fmt.Errorf("%w: %s: %w", ErrNotSupported, op, err)
	default:
		return fmt.Errorf("gdrcopy: %s: %w", op, err)
	}
}

// closedError reports use of a closed object; it matches fs.ErrClosed.
func closedError(op string) error {
	return fmt.Errorf("gdrcopy: %s: %w", op, fs.ErrClosed)
}
