//go:build linux

package gdrdrv

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Host is the boundary that issues real system calls.
var Host Syscalls = host{}

type host struct{}

func (host) Open(path string) (int, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

func (host) Close(fd int) error {
	return unix.Close(fd)
}

func (host) Ioctl(fd int, req uint32, arg unsafe.Pointer) error {
	for {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg))
		switch errno {
		case 0:
			return nil
		case unix.EINTR:
			continue
		default:
			return errno
		}
	}
}

func (host) Mmap(fd int, offset int64, length int) ([]byte, error) {
	return unix.Mmap(fd, offset, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
}

func (host) Munmap(b []byte) error {
	return unix.Munmap(b)
}

func (host) Reserve(b []byte) error {
	return reserve(b)
}

// reserve maps an inaccessible anonymous region over b (see
// [Syscalls.Reserve]).
func reserve(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	_, err := unix.MmapPtr(-1, 0, unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)),
		unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED|unix.MAP_NORESERVE)
	return err
}
