package gdrcopy

import (
	"fmt"
	"unsafe"

	"github.com/p2pkit/p2pkit/gdrcopy/internal/wccopy"
)

// StoreUint32 stores v, in the CPU's byte order (little-endian on amd64
// and arm64, as the GPU's), at off in the mapping with one naturally
// aligned 4-byte store: the store of a flag or doorbell, without the copy's
// ladder. The store comes after every earlier load and after the stores of
// every earlier CopyToDevice and Store, and before any later store (see
// "Ordering" in the package documentation). The word must lie within the
// mapping and be 4-byte aligned. It fails as CopyToDevice does.
func (m *Mapping) StoreUint32(off int, v uint32) error {
	p, ok := m.word(off, 4)
	switch {
	case !ok:
		return m.refuseWord("store uint32", off, 4)
	case !m.kernelFaults:
		return m.guardedWord("store uint32", func() { wccopy.Store32((*uint32)(p), v) })
	}
	if addr := wccopy.TryStore32((*uint32)(p), v); addr != 0 {
		return m.faultAt("store uint32", addr)
	}
	return nil
}

// StoreUint64 is StoreUint32 for an 8-byte aligned 8-byte word.
func (m *Mapping) StoreUint64(off int, v uint64) error {
	p, ok := m.word(off, 8)
	switch {
	case !ok:
		return m.refuseWord("store uint64", off, 8)
	case !m.kernelFaults:
		return m.guardedWord("store uint64", func() { wccopy.Store64((*uint64)(p), v) })
	}
	if addr := wccopy.TryStore64((*uint64)(p), v); addr != 0 {
		return m.faultAt("store uint64", addr)
	}
	return nil
}

// LoadUint32 loads the 4-byte word at off in the mapping with one
// naturally aligned load, which comes before every later load and store,
// the streaming loads of a later CopyFromDevice included: poll a flag with
// it, then copy the data the flag guards (see "Ordering" in the package
// documentation). The word must lie within the mapping and be 4-byte
// aligned. It fails as CopyFromDevice does.
func (m *Mapping) LoadUint32(off int) (v uint32, err error) {
	p, ok := m.word(off, 4)
	switch {
	case !ok:
		return 0, m.refuseWord("load uint32", off, 4)
	case !m.kernelFaults:
		err = m.guardedWord("load uint32", func() { v = wccopy.Load32((*uint32)(p)) })
		return v, err
	}
	v, addr := wccopy.TryLoad32((*uint32)(p))
	if addr != 0 {
		return 0, m.faultAt("load uint32", addr)
	}
	return v, nil
}

// LoadUint64 is LoadUint32 for an 8-byte aligned 8-byte word.
func (m *Mapping) LoadUint64(off int) (v uint64, err error) {
	p, ok := m.word(off, 8)
	switch {
	case !ok:
		return 0, m.refuseWord("load uint64", off, 8)
	case !m.kernelFaults:
		err = m.guardedWord("load uint64", func() { v = wccopy.Load64((*uint64)(p)) })
		return v, err
	}
	v, addr := wccopy.TryLoad64((*uint64)(p))
	if addr != 0 {
		return 0, m.faultAt("load uint64", addr)
	}
	return v, nil
}

// guardedWord runs access, one word kernel, under the fault guard, where
// the kernels do not return their faults.
func (m *Mapping) guardedWord(op string, access func()) (err error) {
	g := armGuard()
	defer func() {
		if !g.done {
			err = m.fault(op, g, recover())
		}
	}()
	access()
	g.disarm()
	return nil
}

// word returns the address of the size-byte word at off, or false if the
// mapping is not usable, the word is not within it or not aligned.
func (m *Mapping) word(off, size int) (unsafe.Pointer, bool) {
	if !m.usable(off, size) {
		return nil, false
	}
	p := unsafe.Add(unsafe.Pointer(unsafe.SliceData(m.mem)), off)
	return p, uintptr(p)&uintptr(size-1) == 0
}

// refuseWord explains why word refused.
func (m *Mapping) refuseWord(op string, off, size int) error {
	if !m.usable(off, size) {
		return m.refuse(op, off, size)
	}
	return fmt.Errorf("gdrcopy: %s at %d: the word is not %d-byte aligned", op, off, size)
}
