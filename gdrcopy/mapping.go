package gdrcopy

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"unsafe"

	"github.com/p2pkit/p2pkit/gdrcopy/internal/gdrdrv"
	"github.com/p2pkit/p2pkit/gdrcopy/internal/wccopy"
)

// Mapping is a buffer mapped into the process: CPU loads and stores reach
// the GPU's memory through its BAR. Offsets are relative to the pinned
// address. It is safe for concurrent use, and copies take no lock: copies
// on one mapping or on several run in parallel.
//
// Copies on write-combining and device mappings use the kernels of
// gdrcopy/internal/wccopy, the counterpart of gdr_copy_to_mapping and
// gdr_copy_from_mapping: the device pointer's alignment picks every access
// width (so no device access is unaligned), the bulk moves with streaming
// stores or loads, and a store fence ends each copy to the device, so its
// stores have left the CPU's write-combining buffers when CopyToDevice
// returns; copies from the device fence nothing (see "Ordering" in the
// package documentation). Caching mappings use a plain copy, as libgdrapi
// uses memcpy. Copies are blocking CPU stores and loads: they order nothing
// with GPU work already launched (see the GPUDirect RDMA documentation on
// synchronization). Reads from a write-combining mapping are uncached and
// far slower than writes.
//
// A fault on the mapping during a copy becomes an error, never a crash:
// the kernels return it, or a fault guard (runtime/debug.SetPanicOnFault)
// catches it. See the package documentation, "Invalidation", "Faults" and
// "Concurrency".
type Mapping struct {
	b          *Buffer
	typ        MappingType
	persistent bool   // the driver never tears the mapping down on its own
	mem        []byte // the mapped buffer; fixed for the life of the Mapping
	// kernelFaults: the wccopy kernels return their faults
	// (wccopy.CatchFaults), so word accesses need no fault guard; fast:
	// copies need none either, for the mapping is not caching (which copies
	// with Go's copy).
	kernelFaults, fast bool
	s                  *mapState
	cleanup            runtime.Cleanup
}

// mapState is the part of a Mapping that its cleanup reads; it must not
// reference the Mapping, or the Mapping would never be collected.
type mapState struct {
	flags   atomic.Uint32 // stateClosed, stateInvalid, stateFaulted
	exposed atomic.Bool   // Bytes handed the memory out
	sys     gdrdrv.Syscalls
	raw     []byte // as returned by mmap, rounded to host pages
}

// Mapping states, bits of mapState.flags. Any of them stops copies.
const (
	// stateClosed: the mapping was replaced by an inaccessible reservation.
	stateClosed uint32 = 1 << iota
	// stateInvalid: the GPU memory is known to be freed.
	stateInvalid
	// stateFaulted: an access faulted although the driver does not tear
	// mappings down.
	stateFaulted
)

// newMapping returns the Mapping of raw, in which b's Size bytes start at
// off. Its cleanup, for a Mapping dropped without
// Close, unmaps raw unless Bytes handed it out (see [Mapping.Bytes]), and
// otherwise releases the reservation Close left.
func newMapping(b *Buffer, typ MappingType, persistent bool, sys gdrdrv.Syscalls, raw []byte, off int) *Mapping {
	s := &mapState{sys: sys, raw: raw}
	m := &Mapping{b: b, typ: typ, persistent: persistent, mem: raw[off : off+int(b.size) : off+int(b.size)], s: s,
		kernelFaults: wccopy.CatchFaults()}
	m.fast = m.kernelFaults && typ != MappingCaching
	m.cleanup = runtime.AddCleanup(m, (*mapState).release, s)
	return m
}

// release unmaps what a collected Mapping leaves: the mapping itself if it
// was never closed, or the reservation that replaced it. It unmaps nothing
// once Bytes has handed the memory out, since a slice of it may outlive
// the Mapping; the mapping (or reservation) then lasts as long as the
// process.
func (s *mapState) release() {
	if s.exposed.Load() {
		return
	}
	_ = s.sys.Munmap(s.raw)
}

// Len returns the length of the mapping, the size the buffer was pinned
// with; 0 once the mapping is closed.
func (m *Mapping) Len() int {
	if m.s.flags.Load()&stateClosed != 0 {
		return 0
	}
	return len(m.mem)
}

// Type returns how the CPU maps the buffer.
func (m *Mapping) Type() MappingType { return m.typ }

// CopyToDevice copies src to the mapping at off, and fences its stores
// before any later store (see "Ordering" in the package documentation).
// Nothing is copied unless the whole range lies within the mapping. Once the mapping is closed it
// fails with an error matching [io/fs.ErrClosed]; once the GPU memory is
// known to be freed, with [ErrInvalidated]; after a fault on the mapping in
// persistent mode, with [ErrFault].
func (m *Mapping) CopyToDevice(off int, src []byte) error {
	if !m.fast || !m.usable(off, len(src)) {
		return m.guardedCopy("copy to device", off, src, true)
	}
	if addr := wccopy.TryToDevice(m.at(off), unsafe.SliceData(src), len(src)); addr != 0 {
		return m.faultAt("copy to device", addr)
	}
	return nil
}

// CopyFromDevice copies len(dst) bytes of the mapping at off to dst. It
// fences nothing: to read data the GPU flagged, poll the flag with
// [Mapping.LoadUint32] or [Mapping.LoadUint64] first (see "Ordering" in the
// package documentation). Nothing is copied unless the whole range lies
// within the mapping. It fails as CopyToDevice does.
func (m *Mapping) CopyFromDevice(dst []byte, off int) error {
	if !m.fast || !m.usable(off, len(dst)) {
		return m.guardedCopy("copy from device", off, dst, false)
	}
	if addr := wccopy.TryFromDevice(unsafe.SliceData(dst), m.at(off), len(dst)); addr != 0 {
		return m.faultAt("copy from device", addr)
	}
	return nil
}

// at returns the address of the mapping's byte at off, which usable
// checked.
func (m *Mapping) at(off int) *byte {
	return (*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(m.mem)), off))
}

// guardedCopy is CopyToDevice (toDevice) and CopyFromDevice where a fault needs
// the guard, or the copy is refused: it checks the state and range, and
// copies buf to or from the mapping at off under the fault guard.
func (m *Mapping) guardedCopy(op string, off int, buf []byte, toDevice bool) (err error) {
	if !m.usable(off, len(buf)) {
		return m.refuse(op, off, len(buf))
	}
	if len(buf) == 0 {
		return nil
	}
	dev := m.mem[off : off+len(buf) : off+len(buf)]
	g := armGuard()
	defer func() {
		if !g.done {
			err = m.fault(op, g, recover())
		}
	}()
	switch {
	case m.typ == MappingCaching && toDevice:
		copy(dev, buf)
	case m.typ == MappingCaching:
		copy(buf, dev)
	case toDevice:
		wccopy.ToDevice(dev, buf)
	default:
		wccopy.FromDevice(buf, dev)
	}
	g.disarm()
	return nil
}

// Kernels returns the bare copy kernels that CopyToDevice and
// CopyFromDevice run for this mapping's type, with no bounds or state
// check and no fault guard: the wccopy kernels for write-combining and
// device mappings, copy for caching ones. Their arguments are a slice of
// [Mapping.Bytes] on the device side (dst of toDevice, src of fromDevice)
// and ordinary memory on the other; like copy, they copy min(len(dst),
// len(src)) bytes and return that count. A fault in them is not turned
// into an error: it panics (with the faulting address where the kernels
// return their faults, see the package documentation's "Faults") or, with
// the runtime's default handling, crashes the program. They exist to
// measure what the API adds to a copy (gdrbench copylat), and for the rare
// caller that must copy through Bytes with the right access widths and
// fences.
func (m *Mapping) Kernels() (toDevice, fromDevice func(dst, src []byte) int) {
	if m.typ == MappingCaching {
		return copyBytes, copyBytes
	}
	return wccopy.ToDevice, wccopy.FromDevice
}

func copyBytes(dst, src []byte) int { return copy(dst, src) }

// guard is the fault guard of one copy. armGuard turns panic-on-fault on
// for the goroutine; disarm, after the kernel returned, restores the
// goroutine's setting. A copy defers a function that does nothing once the
// guard is disarmed, and otherwise hands what it recovers to
// [Mapping.fault], which restores the setting first. The deferred function
// calls recover only on the fault path, which keeps the normal path to two
// calls of SetPanicOnFault and the deferred call.
type guard struct {
	pof  bool // the goroutine's setting before the copy
	done bool // the kernel returned
}

func armGuard() *guard { return &guard{pof: debug.SetPanicOnFault(true)} }

func (g *guard) disarm() {
	debug.SetPanicOnFault(g.pof)
	g.done = true
}

// errNoAddress is the runtime's value for a memory fault whose address is
// below 0x1000 (runtime/signal_unix.go sigpanic takes it for a nil
// dereference, even with panic-on-fault). A copy dereferences only the
// pointers of two non-empty slices, so inside the guard it means a fault
// whose address got lost.
var errNoAddress = func() (r any) {
	defer func() { r = recover() }()
	var p *byte
	_ = *p
	return nil
}()

// fault restores the goroutine's panic-on-fault setting saved in g and
// classifies r, a panic recovered from a copy. A fault inside the
// mapping after Close is ErrClosed. In non-persistent mode any other fault
// inside it means the driver tore the mapping down because the memory was
// freed (gdrdrv.c gdrdrv_get_pages_free_callback): ErrInvalidated. In
// persistent mode nothing should tear it down, so the fault is reported as
// such: ErrFault.
//
// A memory fault reported without an address, or at one outside the
// mapping, is the mapping's only if the driver confirms that it tore the
// mapping down (GET_CB_FLAG); otherwise it is not the mapping's and panics
// again. Real kernels report the address of a SIGBUS on a torn-down gdrdrv
// mapping, but qemu-user 7.2 does not: it delivers the SIGBUS that the host
// raises for the guest with si_addr zero or unrelated to the access.
func (m *Mapping) fault(op string, g *guard, r any) error {
	debug.SetPanicOnFault(g.pof)
	addr := wccopy.NoAddress
	if f, ok := r.(interface{ Addr() uintptr }); ok {
		addr = f.Addr()
	} else if r != errNoAddress {
		panic(r)
	}
	if err := m.classify(op, addr); err != nil {
		return err
	}
	panic(r)
}

// faultAt classifies a fault a kernel returned (see wccopy.CatchFaults) as
// fault classifies a recovered one; a fault that is not the mapping's panics
// as the kernel's own functions would.
func (m *Mapping) faultAt(op string, addr uintptr) error {
	if err := m.classify(op, addr); err != nil {
		return err
	}
	panic(&wccopy.Fault{Address: addr})
}

// classify returns the error for a fault at addr (wccopy.NoAddress when
// unknown) during op, or nil if the fault is not the mapping's.
func (m *Mapping) classify(op string, addr uintptr) error {
	where := fmt.Sprintf("%s %#x+%d", op, m.b.addr, m.b.size)
	if addr == wccopy.NoAddress || !m.contains(addr) {
		if inv, err := m.b.Invalidated(); err != nil || !inv {
			return nil
		}
		return fmt.Errorf("%w: %s: the mapping faulted", ErrInvalidated, where)
	}
	switch {
	case m.s.flags.Load()&stateClosed != 0:
		return closedError(op)
	case m.persistent:
		m.s.flags.Or(stateFaulted)
		return fmt.Errorf("%w: %s: the mapping faulted at %#x although the driver does not tear mappings down", ErrFault, where, addr)
	}
	m.s.flags.Or(stateInvalid)
	return fmt.Errorf("%w: %s: the mapping faulted at %#x", ErrInvalidated, where, addr)
}

// ReadAt implements [io.ReaderAt] over the mapping: a read that reaches the
// end returns the bytes before it and [io.EOF].
func (m *Mapping) ReadAt(p []byte, off int64) (int, error) {
	if m.s.flags.Load()&stateClosed != 0 {
		return 0, closedError("read")
	}
	if off < 0 {
		return 0, fmt.Errorf("gdrcopy: read at %d: negative offset", off)
	}
	if off >= int64(len(m.mem)) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), int64(len(m.mem))-off))
	if err := m.CopyFromDevice(p[:n], int(off)); err != nil {
		return 0, err
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// WriteAt implements [io.WriterAt] over the mapping. It writes nothing
// unless all of p fits.
func (m *Mapping) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(math.MaxInt) {
		return 0, fmt.Errorf("gdrcopy: write at %d: offset out of range", off)
	}
	if err := m.CopyToDevice(int(off), p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Bytes returns the mapped memory itself, or nil once the mapping is
// closed. It is an escape hatch and unsafe:
//
//   - the slice is valid only until the Mapping, its Buffer or its Driver is
//     closed; using it after that faults and crashes the program (Close
//     leaves an inaccessible reservation at the addresses, so they are
//     never reused for something else while the slice may be live);
//   - a Mapping whose Bytes was called and that is dropped without Close
//     stays mapped, and keeps its pin, until the process exits: a slice of
//     it may still be in use, and the garbage collector cannot know;
//   - accesses through it are not guarded: if the GPU memory is freed while
//     pinned (non-persistent mode), the next access raises SIGBUS and
//     crashes the program;
//   - on a write-combining mapping Go's copy and ordinary stores may be
//     merged, reordered and held in the CPU's write-combining buffers, and
//     reads are uncached: visibility and ordering with the GPU are the
//     caller's business (an SFENCE or DMB ST, then
//     cudaFlushGPUDirectRDMAWrites or a flag protocol);
//   - on a device mapping an unaligned access faults.
//
// Prefer CopyToDevice and CopyFromDevice.
func (m *Mapping) Bytes() []byte {
	m.s.exposed.Store(true)
	if m.s.flags.Load()&stateClosed != 0 {
		return nil
	}
	return m.mem
}

// Close unmaps the mapping, as gdr_unmap does. The buffer stays pinned and
// may be mapped again. Close is idempotent.
//
// Close does not wait for copies in flight, yet none of them touches the
// memory once Close has returned: Close replaces the mapping at once with an
// inaccessible reservation of the same addresses (mmap MAP_FIXED,
// PROT_NONE), which unmaps the driver's mapping as munmap would. A copy
// racing with Close therefore either completes before it, or faults on the
// reservation and fails with an error matching [io/fs.ErrClosed], having
// copied a prefix of its bytes. The reservation holds no memory; it is
// released once the Mapping is garbage collected, so its addresses are not
// reused while a copy on it may still run.
func (m *Mapping) Close() error {
	b := m.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m != m {
		return nil
	}
	b.m = nil
	return m.unmap()
}

// unmap closes m. The caller holds b.mu.
func (m *Mapping) unmap() error {
	if m.s.flags.Or(stateClosed)&stateClosed != 0 {
		return nil
	}
	if err := m.s.sys.Reserve(m.s.raw); err != nil {
		return fmt.Errorf("gdrcopy: unmap %#x+%d: %w", m.b.addr, m.b.size, err)
	}
	return nil
}

// refuse explains why a copy of n bytes at off was refused.
func (m *Mapping) refuse(op string, off, n int) error {
	f := m.s.flags.Load()
	switch {
	case f&stateClosed != 0:
		return closedError(op)
	case f&stateInvalid != 0:
		return fmt.Errorf("%w: %s %#x+%d", ErrInvalidated, op, m.b.addr, m.b.size)
	case f&stateFaulted != 0:
		return fmt.Errorf("%w: %s %#x+%d: an earlier access faulted", ErrFault, op, m.b.addr, m.b.size)
	}
	return fmt.Errorf("gdrcopy: %s: [%d, +%d) is outside the mapping of %d bytes", op, off, n, len(m.mem))
}

// usable reports whether the mapping takes accesses (no state bit set) and
// [off, off+n) lies within it; refuse says why not.
func (m *Mapping) usable(off, n int) bool {
	return m.s.flags.Load() == 0 && uint(off) <= uint(len(m.mem)) && n <= len(m.mem)-off
}

// contains reports whether addr lies in the mapped memory.
func (m *Mapping) contains(addr uintptr) bool {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(m.s.raw)))
	return addr >= start && addr-start < uintptr(len(m.s.raw))
}

var _ interface {
	io.ReaderAt
	io.WriterAt
} = (*Mapping)(nil)
