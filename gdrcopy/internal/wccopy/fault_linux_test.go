//go:build (amd64 || arm64) && !purego

package wccopy

import (
	"os"
	"runtime/debug"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// faultingPages returns two pages: the first faults with SIGSEGV (PROT_NONE),
// the second with SIGBUS (a shared mapping of a file truncated to nothing).
func faultingPages(t *testing.T) (segv, bus []byte) {
	t.Helper()
	page := os.Getpagesize()
	segv, err := unix.Mmap(-1, 0, page, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(segv) })
	f, err := os.CreateTemp(t.TempDir(), "bus")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(int64(page)); err != nil {
		t.Fatal(err)
	}
	bus, err = unix.Mmap(int(f.Fd()), 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(bus) })
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	return segv, bus
}

// TestFaultReturn checks that every kernel, in every available variant,
// returns a fault on either kind of page instead of crashing, with the
// address the kernel reported, and that memory that does not fault copies
// as before with no fault.
func TestFaultReturn(t *testing.T) {
	if !CatchFaults() {
		t.Skip("faults are not returned in this build or on this CPU")
	}
	segv, bus := faultingPages(t)
	host := make([]byte, 256)
	ok := make([]byte, 256)
	type access struct {
		name string
		do   func(dev []byte) uintptr
	}
	var accesses []access
	for _, v := range Variants() {
		if !v.Available || v.Name == "generic" {
			continue
		}
		if v.ToDevice != nil {
			accesses = append(accesses, access{v.Name + "/to", func(dev []byte) uintptr { return catch(func() { v.ToDevice(dev, host) }) }})
		}
		if v.FromDevice != nil {
			accesses = append(accesses, access{v.Name + "/from", func(dev []byte) uintptr { return catch(func() { v.FromDevice(host, dev) }) }})
		}
	}
	accesses = append(accesses,
		access{"TryToDevice", func(dev []byte) uintptr { return TryToDevice(&dev[0], &host[0], 8) }},
		access{"TryFromDevice", func(dev []byte) uintptr { return TryFromDevice(&host[0], &dev[0], 8) }},
		access{"TryStore32", func(dev []byte) uintptr { return TryStore32((*uint32)(unsafe.Pointer(&dev[0])), 1) }},
		access{"TryStore64", func(dev []byte) uintptr { return TryStore64((*uint64)(unsafe.Pointer(&dev[0])), 1) }},
		access{"TryLoad32", func(dev []byte) uintptr { _, f := TryLoad32((*uint32)(unsafe.Pointer(&dev[0]))); return f }},
		access{"TryLoad64", func(dev []byte) uintptr { _, f := TryLoad64((*uint64)(unsafe.Pointer(&dev[0]))); return f }},
		access{"Store64", func(dev []byte) uintptr { return catch(func() { Store64((*uint64)(unsafe.Pointer(&dev[0])), 1) }) }},
		access{"Load64", func(dev []byte) uintptr { return catch(func() { Load64((*uint64)(unsafe.Pointer(&dev[0]))) }) }},
	)
	for _, a := range accesses {
		t.Run(a.name, func(t *testing.T) {
			for _, page := range []struct {
				name string
				mem  []byte
			}{{"SIGSEGV", segv}, {"SIGBUS", bus}} {
				base := uintptr(unsafe.Pointer(&page.mem[0]))
				f := a.do(page.mem)
				// qemu-user may report a SIGBUS without its address.
				if f != NoAddress && (f < base || f >= base+uintptr(len(page.mem))) {
					t.Errorf("%s: fault %#x, want one in [%#x, %#x) or NoAddress", page.name, f, base, base+uintptr(len(page.mem)))
				}
			}
			if f := a.do(ok); f != 0 {
				t.Errorf("ordinary memory: fault %#x, want none", f)
			}
		})
	}
}

// catch runs f and returns the address of the *Fault it panicked with, 0
// if it did not panic. Any other panic fails by re-panicking.
func catch(f func()) (addr uintptr) {
	defer func() {
		if r := recover(); r != nil {
			addr = r.(*Fault).Addr()
		}
	}()
	f()
	return 0
}

// TestFaultHandedOn checks that with the handler installed, a fault outside
// the kernels is still the runtime's: Go code under SetPanicOnFault gets the
// runtime's panic with the address, and a nil dereference its usual panic.
func TestFaultHandedOn(t *testing.T) {
	if !CatchFaults() {
		t.Skip("faults are not returned in this build or on this CPU")
	}
	segv, bus := faultingPages(t)
	for _, page := range [][]byte{segv, bus} {
		func() {
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
			defer func() {
				r := recover()
				if _, ok := r.(interface{ Addr() uintptr }); !ok {
					t.Errorf("recovered %v (%T), want the runtime's fault error", r, r)
				}
				if _, ours := r.(*Fault); ours {
					t.Errorf("a fault in Go code came back as a kernel's: %v", r)
				}
			}()
			page[1] = 1
		}()
	}
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Error("a nil dereference did not panic")
			}
		}()
		var p *int
		*p = 1
	}()
}
