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
