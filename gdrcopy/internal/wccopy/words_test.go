package wccopy

import (
	"bytes"
	"encoding/binary"
	"testing"
	"unsafe"
)

// The word kernels touch exactly their word, at every aligned offset.
func TestWords(t *testing.T) {
	buf := aligned(64)
	for off := 0; off+8 <= 64; off += 4 {
		for _, size := range []int{4, 8} {
			if off%size != 0 {
				continue
			}
			for i := range buf {
				buf[i] = guardByte
			}
			p := unsafe.Pointer(&buf[off])
			want := bytes.Repeat([]byte{guardByte}, 64)
			if size == 4 {
				Store32((*uint32)(p), 0x01020304)
				binary.NativeEndian.PutUint32(want[off:], 0x01020304)
				if got := Load32((*uint32)(p)); got != 0x01020304 {
					t.Errorf("Load32 at %d = %#x", off, got)
				}
			} else {
				Store64((*uint64)(p), 0x0102030405060708)
				binary.NativeEndian.PutUint64(want[off:], 0x0102030405060708)
				if got := Load64((*uint64)(p)); got != 0x0102030405060708 {
					t.Errorf("Load64 at %d = %#x", off, got)
				}
			}
			if !bytes.Equal(buf, want) {
				t.Errorf("Store%d at %d: buffer %x, want %x", size*8, off, buf, want)
			}
		}
	}
}
