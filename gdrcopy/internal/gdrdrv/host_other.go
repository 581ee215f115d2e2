//go:build !linux

package gdrdrv

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"
)

// Host is the boundary that issues real system calls. gdrdrv exists only on
// Linux: here every call fails with an error matching
// [errors.ErrUnsupported].
var Host Syscalls = host{}

type host struct{}

var errHost = fmt.Errorf("gdrdrv: %w on %s", errors.ErrUnsupported, runtime.GOOS)

func (host) Open(string) (int, error)                { return -1, errHost }
func (host) Close(int) error                         { return errHost }
func (host) Ioctl(int, uint32, unsafe.Pointer) error { return errHost }
func (host) Mmap(int, int64, int) ([]byte, error)    { return nil, errHost }
func (host) Munmap([]byte) error                     { return errHost }
func (host) Reserve([]byte) error                    { return errHost }
