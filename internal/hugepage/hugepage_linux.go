package hugepage

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Advise marks the whole huge pages inside b, [beg, end), MADV_HUGEPAGE; ok is false
// when b holds none (64 KiB-page arm64, whose huge pages are 512 MiB, seldom fits
// one). The advice leaves b's contents as they are, and a kernel without
// transparent huge pages (EINVAL) leaves the memory as it was.
func Advise(b []byte) (beg, end uintptr, ok bool) {
	page := uintptr(os.Getpagesize())
	huge := page * (page / 8) // what one page-middle-directory entry maps
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	beg = (start + huge - 1) &^ (huge - 1)
	end = (start + uintptr(len(b))) &^ (huge - 1)
	if beg >= end {
		return 0, 0, false
	}
	_ = unix.Madvise(b[beg-start:end-start], unix.MADV_HUGEPAGE) // advice only
	return beg, end, true
}
