//go:build (amd64 || arm64) && !purego

package wccopy

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The handlers faultHandler hands other faults to (fault_linux_GOARCH.s
// reads them), set before it is installed and never changed after.
//
//lint:ignore U1000 read by faultHandler only
var prevSIGSEGV, prevSIGBUS uintptr

// kernelSigaction is struct sigaction as the rt_sigaction system call takes
// it on amd64 and arm64 (include/linux/signal_types.h struct sigaction,
// with SA_RESTORER).
type kernelSigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

// saSiginfo is SA_SIGINFO (include/uapi/asm-generic/signal-defs.h): the
// handler takes siginfo and ucontext, which faultHandler reads.
const saSiginfo = 0x4

// faultHandler is the SIGSEGV and SIGBUS handler in fault_linux_GOARCH.s;
// faultHandlerPC gives its address to the kernel.
//
//lint:ignore U1000 entered by the kernel only
func faultHandler()

// faultHandlerPC returns faultHandler's entry address.
func faultHandlerPC() uintptr

// fixupCopy and fixupWord are where faultHandler resumes a faulting copy
// or word kernel; nothing calls them.
//
//lint:ignore U1000 entered from faultHandler only
func fixupCopy(dst, src *byte, n int) (fault uintptr)

//lint:ignore U1000 entered from faultHandler only
func fixupWord(p *uint64, v uint64) (fault uintptr)

// installFaultHandler puts faultHandler in front of the SIGSEGV and SIGBUS
// handlers in place, the Go runtime's, keeping their flags, mask and
// restorer. It installs nothing, and returns false, unless both signals
// have a handler that takes siginfo to hand other faults to.
func installFaultHandler() bool {
	var segv, bus kernelSigaction
	if sigaction(unix.SIGSEGV, nil, &segv) != nil || sigaction(unix.SIGBUS, nil, &bus) != nil {
		return false
	}
	for _, act := range []*kernelSigaction{&segv, &bus} {
		if act.handler <= 1 || act.flags&saSiginfo == 0 { // SIG_DFL, SIG_IGN, or a handler without siginfo
			return false
		}
	}
	prevSIGSEGV, prevSIGBUS = segv.handler, bus.handler
	segv.handler, bus.handler = faultHandlerPC(), faultHandlerPC()
	if sigaction(unix.SIGSEGV, &segv, nil) != nil {
		return false
	}
	if sigaction(unix.SIGBUS, &bus, nil) != nil {
		// Leave SIGSEGV's handler in place: it forwards everything but the
		// kernels' faults, and the kernels' SIGBUS faults stay the runtime's.
		return false
	}
	return true
}

// sigaction is the rt_sigaction system call.
func sigaction(sig unix.Signal, act, old *kernelSigaction) error {
	_, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig),
		uintptr(unsafe.Pointer(act)), uintptr(unsafe.Pointer(old)), 8, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
