package wccopy

import (
	"fmt"
	"sync"
)

// Fault return.
//
// gdrcopy must turn a fault on a mapping (gdrdrv tore it down, or Close
// replaced it) into an error. runtime/debug.SetPanicOnFault does that for
// any Go code, but arming and disarming it around every copy costs more
// than an 8-byte copy itself. The assembly kernels therefore return their
// faults instead, the way the Linux kernel's exception tables let
// copy_from_user fail (arch/x86/mm/extable.c): while a kernel runs it keeps a
// mark in two registers (its cookie and the stack pointer it was entered
// with); a SIGSEGV or SIGBUS handler, installed once by [CatchFaults] in
// front of the Go runtime's, resumes a faulting kernel at its fixup, which
// returns the fault address as the kernel's result, and hands every other
// fault on to the runtime's handler untouched. The bytes before the faulting
// access may have been copied.

// NoAddress is the fault address the Try functions return when the fault
// was reported without one (si_addr 0, as qemu-user can deliver a SIGBUS).
const NoAddress = ^uintptr(0)

var (
	catchOnce sync.Once
	catching  bool
)

// CatchFaults installs the fault handler, once, and reports whether the Try
// functions return faults: the handler is in place and ToDevice and
// FromDevice both use an assembly kernel. It is false in builds without
// assembly (other GOARCHes, the purego tag), with GODEBUG turning every
// assembly load kernel off, off Linux, and where SIGSEGV or SIGBUS had no
// handler to hand other faults to. Where it is false, a fault in a kernel
// is the runtime's, as in any Go code.
func CatchFaults() bool {
	catchOnce.Do(func() {
		to, from := selected()
		catching = to != "generic" && from != "generic" && installFaultHandler()
	})
	return catching
}

// TryToDevice is ToDevice of the n bytes at src to dst, returning a fault
// instead of raising it: where CatchFaults holds, fault is the address of
// an access that faulted (or NoAddress), 0 if none did. It takes pointers,
// as the word functions do, so that it costs its caller no more than the
// kernel's call.
func TryToDevice(dst, src *byte, n int) (fault uintptr) { return storeKernel(dst, src, n) }

// TryFromDevice is FromDevice of the n bytes at src to dst, returning a
// fault as TryToDevice does.
func TryFromDevice(dst, src *byte, n int) (fault uintptr) { return loadKernel(dst, src, n) }

// TryStore32 is Store32 returning a fault as TryToDevice does.
func TryStore32(p *uint32, v uint32) (fault uintptr) { return store32(p, v) }

// TryStore64 is Store64 returning a fault as TryToDevice does.
func TryStore64(p *uint64, v uint64) (fault uintptr) { return store64(p, v) }

// TryLoad32 is Load32 returning a fault as TryToDevice does.
func TryLoad32(p *uint32) (v uint32, fault uintptr) { return load32(p) }

// TryLoad64 is Load64 returning a fault as TryToDevice does.
func TryLoad64(p *uint64) (v uint64, fault uintptr) { return load64(p) }

// Fault is the panic of ToDevice, FromDevice and the word functions when a
// kernel returned a fault: what the runtime's own panic-on-fault error
// would have said, with the address.
type Fault struct {
	Address uintptr // the address that faulted, or NoAddress
}

func (f *Fault) Error() string {
	if f.Address == NoAddress {
		return "wccopy: memory fault in a copy kernel (no address reported)"
	}
	return fmt.Sprintf("wccopy: memory fault in a copy kernel at address %#x", f.Address)
}

// Addr returns the address that faulted, or NoAddress.
func (f *Fault) Addr() uintptr { return f.Address }

// raise panics with a *Fault if fault is not 0.
func raise(fault uintptr) {
	if fault != 0 {
		panic(&Fault{Address: fault})
	}
}
