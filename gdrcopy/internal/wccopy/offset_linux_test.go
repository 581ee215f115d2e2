package wccopy

import (
	"fmt"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BenchmarkPageOffset measures ToDevice and FromDevice between a
// page-aligned shared mapping, as a device mapping is, and a written host
// buffer that begins 0, 64 or 2048 bytes past a page boundary: on some CPUs
// large copies to write-back memory are slower when the two share a page
// offset, which is why gdrbench apiperf --copies puts every side's host
// buffer at one offset.
func BenchmarkPageOffset(b *testing.B) {
	page := os.Getpagesize()
	for _, n := range []int{64 << 10, 1 << 20, 16 << 20} {
		dev, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = unix.Munmap(dev) })
		raw := make([]byte, n+2*page)
		base := int(-uintptr(unsafe.Pointer(unsafe.SliceData(raw)))) & (page - 1)
		for _, off := range []int{0, 64, 2048} {
			host := raw[base+off : base+off+n]
			for _, dir := range []string{"to", "from"} {
				b.Run(fmt.Sprintf("%s/%d/offset%d", dir, n, off), func(b *testing.B) {
					write(dev, 0x5a)
					write(host, 0xa5)
					b.SetBytes(int64(n))
					for b.Loop() {
						if dir == "to" {
							ToDevice(dev, host)
						} else {
							FromDevice(host, dev)
						}
					}
				})
			}
		}
	}
}
