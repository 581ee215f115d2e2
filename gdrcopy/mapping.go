package gdrcopy

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/p2pkit/p2pkit/gdrcopy/internal/wccopy"
)

// Mapping is a buffer mapped into the process: CPU loads and stores reach
// the GPU's memory through its BAR. Offsets are relative to the pinned
// address. It is safe for concurrent use; copies hold a shared lock of the
// Mapping only, so they run in parallel with each other and with copies on
// other mappings.
//
// Copies on write-combining and device mappings use the kernels of
// gdrcopy/internal/wccopy, the counterpart of gdr_copy_to_mapping and
// gdr_copy_from_mapping: the device pointer's alignment picks every access
// width (so no device access is unaligned), the bulk moves with streaming
// stores or loads, and a fence ends each copy, so the stores have left the
// CPU's write-combining buffers when CopyToDevice returns. Caching mappings
// use a plain copy, as libgdrapi uses memcpy. Copies are blocking CPU
// stores and loads: they order nothing with GPU work already launched (see
// the GPUDirect RDMA documentation on synchronization). Reads from a
// write-combining mapping are uncached and far slower than writes.
type Mapping struct {
	b       *Buffer
	typ     MappingType
	guarded bool        // copies catch faults: the driver may zap the mapping
	invalid atomic.Bool // set once the memory is known to be freed
	cleanup runtime.Cleanup

	mu  sync.RWMutex // held shared by copies, exclusively by unmap
	mem []byte       // the mapped buffer; nil once unmapped
	raw []byte       // as returned by mmap, rounded to host pages
}

// Len returns the length of the mapping, the size the buffer was pinned
// with; 0 once the mapping is closed.
func (m *Mapping) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.mem)
}

// Type returns how the CPU maps the buffer.
func (m *Mapping) Type() MappingType { return m.typ }

// CopyToDevice copies src to the mapping at off. Nothing is copied unless
// the whole range lies within the mapping. Once the mapping is closed it
// fails with an error matching [io/fs.ErrClosed]; once the GPU memory is
// known to be freed, with [ErrInvalidated].
func (m *Mapping) CopyToDevice(off int, src []byte) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if err := m.check("copy to device", off, len(src)); err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	dst := m.mem[off : off+len(src)]
	if m.guarded {
		return m.guardedCopy("copy to device", dst, src, true)
	}
	m.kernel(dst, src, true)
	return nil
}

// CopyFromDevice copies len(dst) bytes of the mapping at off to dst.
// Nothing is copied unless the whole range lies within the mapping. It fails
// as CopyToDevice does.
func (m *Mapping) CopyFromDevice(dst []byte, off int) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.copyFrom(dst, off)
}

// copyFrom is CopyFromDevice. The caller holds m.mu.
func (m *Mapping) copyFrom(dst []byte, off int) error {
	if err := m.check("copy from device", off, len(dst)); err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	src := m.mem[off : off+len(dst)]
	if m.guarded {
		return m.guardedCopy("copy from device", dst, src, false)
	}
	m.kernel(dst, src, false)
	return nil
}

// kernel copies src to dst with the kernel for the mapping type and
// direction: libgdrapi's ladder of streaming stores or loads for
// write-combining and device mappings, memcpy for caching ones.
func (m *Mapping) kernel(dst, src []byte, toDevice bool) {
	switch {
	case m.typ == MappingCaching:
		copy(dst, src)
	case toDevice:
		wccopy.ToDevice(dst, src)
	default:
		wccopy.FromDevice(dst, src)
	}
}

// guardedCopy runs kernel and turns a memory fault inside the mapping into
// ErrInvalidated. gdrdrv zaps a live mapping only from the NVIDIA free
// callback (gdrdrv.c gdrdrv_get_pages_free_callback), and only in
// non-persistent mode, while the buffer is pinned and mapped, which the
// Mapping's lock guarantees here; so a fault means the memory was freed.
// Any other panic goes on.
func (m *Mapping) guardedCopy(op string, dst, src []byte, toDevice bool) (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		fault, ok := r.(interface{ Addr() uintptr })
		if !ok || !m.contains(fault.Addr()) {
			panic(r)
		}
		m.invalid.Store(true)
		err = fmt.Errorf("%w: %s %#x+%d: the mapping faulted at %#x", ErrInvalidated, op, m.b.addr, m.b.size, fault.Addr())
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	m.kernel(dst, src, toDevice)
	return nil
}

// ReadAt implements [io.ReaderAt] over the mapping: a read that reaches the
// end returns the bytes before it and [io.EOF].
func (m *Mapping) ReadAt(p []byte, off int64) (int, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.mem == nil {
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
	if err := m.copyFrom(p[:n], int(off)); err != nil {
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

// Bytes returns the mapped memory itself. It is an escape hatch and
// unsafe:
//
//   - the slice is valid only until the Mapping, its Buffer or its Driver is
//     closed; using it after that faults, or worse, reaches whatever is
//     mapped at that address later;
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
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.mem
}

// Close unmaps the mapping, waiting for copies in flight, as gdr_unmap
// does. The buffer stays pinned and may be mapped again. Close is
// idempotent.
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

// unmap unmaps the memory. The caller holds b.mu.
func (m *Mapping) unmap() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.raw == nil {
		return nil
	}
	m.cleanup.Stop()
	err := m.b.d.dev.Sys.Munmap(m.raw)
	m.mem, m.raw = nil, nil
	if err != nil {
		return fmt.Errorf("gdrcopy: unmap %#x+%d: %w", m.b.addr, m.b.size, err)
	}
	return nil
}

// check validates a copy of n bytes at off. The caller holds m.mu.
func (m *Mapping) check(op string, off, n int) error {
	if m.mem == nil {
		return closedError(op)
	}
	if m.invalid.Load() {
		return fmt.Errorf("%w: %s %#x+%d", ErrInvalidated, op, m.b.addr, m.b.size)
	}
	if off < 0 || off > len(m.mem) || n > len(m.mem)-off {
		return fmt.Errorf("gdrcopy: %s: [%d, +%d) is outside the mapping of %d bytes", op, off, n, len(m.mem))
	}
	return nil
}

// contains reports whether addr lies in the mapped memory.
func (m *Mapping) contains(addr uintptr) bool {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(m.raw)))
	return addr >= start && addr-start < uintptr(len(m.raw))
}

var _ interface {
	io.ReaderAt
	io.WriterAt
} = (*Mapping)(nil)
