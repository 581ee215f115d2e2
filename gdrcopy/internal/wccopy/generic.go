package wccopy

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"
)

// genericVariant is the pure-Go reference implementation, available in
// every build.
var genericVariant = Variant{
	Name:       "generic",
	Available:  true,
	ToDevice:   toDeviceGeneric,
	FromDevice: fromDeviceGeneric,
}

// width returns the widest access, 8, 4, 2 or 1 bytes, that is naturally
// aligned at addr and no longer than rem bytes (rem > 0). It is the rule of
// the aligned-copy step in libgdrapi's WC ladder (src/memcpy_*.c).
func width(addr uintptr, rem int) int {
	switch {
	case addr&7 == 0 && rem >= 8:
		return 8
	case addr&3 == 0 && rem >= 4:
		return 4
	case addr&1 == 0 && rem >= 2:
		return 2
	}
	return 1
}

// toDeviceGeneric stores to dst only with naturally aligned 1, 2, 4 and
// 8-byte accesses and then fences. Go has no streaming stores, so the bulk
// moves in 8-byte words.
func toDeviceGeneric(dst, src []byte) int {
	n := min(len(dst), len(src))
	d := unsafe.Pointer(unsafe.SliceData(dst))
	for i := 0; i < n; {
		p := unsafe.Add(d, i)
		switch width(uintptr(p), n-i) {
		case 8:
			for ; n-i >= 8; i += 8 {
				*(*uint64)(unsafe.Add(d, i)) = binary.NativeEndian.Uint64(src[i:])
			}
		case 4:
			*(*uint32)(p) = binary.NativeEndian.Uint32(src[i:])
			i += 4
		case 2:
			*(*uint16)(p) = binary.NativeEndian.Uint16(src[i:])
			i += 2
		default:
			*(*uint8)(p) = src[i]
			i++
		}
	}
	fence()
	return n
}

// fromDeviceGeneric loads from src only with naturally aligned 1, 2, 4 and
// 8-byte accesses. Like the assembly load kernels it ends with no fence.
func fromDeviceGeneric(dst, src []byte) int {
	n := min(len(dst), len(src))
	s := unsafe.Pointer(unsafe.SliceData(src))
	for i := 0; i < n; {
		p := unsafe.Add(s, i)
		switch width(uintptr(p), n-i) {
		case 8:
			for ; n-i >= 8; i += 8 {
				binary.NativeEndian.PutUint64(dst[i:], *(*uint64)(unsafe.Add(s, i)))
			}
		case 4:
			binary.NativeEndian.PutUint32(dst[i:], *(*uint32)(p))
			i += 4
		case 2:
			binary.NativeEndian.PutUint16(dst[i:], *(*uint16)(p))
			i += 2
		default:
			dst[i] = *(*uint8)(p)
			i++
		}
	}
	return n
}

// fence is the portable stand-in for SFENCE, MFENCE or DMB: Go offers no
// fence instruction, but a sequentially consistent read-modify-write comes
// close. On amd64 it is a LOCK-prefixed instruction, which no load or store
// passes and which drains the write-combining buffers (Intel SDM vol. 3A,
// "Memory Ordering in P6 and More Recent Processor Families" and "Methods
// of Caching Available"), so there the generic variant keeps every
// guarantee of the package comment's "Ordering". Elsewhere it is only as
// strong as the platform's sequentially consistent atomic, which the Go
// memory model defines between goroutines, not for device memory. The
// generic variant is the reference the assembly is tested against and the
// kernel of other architectures; on arm64 only a purego build uses it.
func fence() {
	var word uint32
	atomic.AddUint32(&word, 0)
}
