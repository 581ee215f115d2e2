package wccopy

import (
	"bytes"
	"testing"
)

// benchSizes are the copy sizes of the benchmarks: a word (the flag a poll
// reads), a fence-dominated line, sizes that fit in L1, L2 and the
// last-level cache, and one that does not.
var benchSizes = []struct {
	name string
	n    int
}{
	{"8B", 8},
	{"64B", 64},
	{"4KiB", 4 << 10},
	{"64KiB", 64 << 10},
	{"1MiB", 1 << 20},
	{"16MiB", 16 << 20},
}

// benchBuffers returns 64-byte aligned dst and src of n bytes, both
// written: a buffer never written reads the kernel's shared zero page,
// which no device mapping resembles and which makes large reads look
// cheap.
func benchBuffers(n int) (dst, src []byte) {
	dst, src = aligned(n), aligned(n)
	write(dst, 0x5a)
	write(src, 0xa5)
	return dst, src
}

// write sets every byte of p to v.
func write(p []byte, v byte) { copy(p, bytes.Repeat([]byte{v}, len(p))) }

// BenchmarkCopy measures Go's copy, the anchor the kernels are compared
// with on ordinary write-back memory.
func BenchmarkCopy(b *testing.B) {
	for _, s := range benchSizes {
		dst, src := benchBuffers(s.n)
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(s.n))
			for b.Loop() {
				copy(dst, src)
			}
		})
	}
}

// BenchmarkToDevice and BenchmarkFromDevice measure ToDevice and
// FromDevice, the kernels gdrcopy's copies call, and every available
// variant through its Variant func.
func BenchmarkToDevice(b *testing.B) { benchVariants(b, true) }

func BenchmarkFromDevice(b *testing.B) { benchVariants(b, false) }

func benchVariants(b *testing.B, toDevice bool) {
	selected := FromDevice
	if toDevice {
		selected = ToDevice
	}
	b.Run("selected", func(b *testing.B) { benchSizesOf(b, selected) })
	for _, v := range Variants() {
		fn := v.FromDevice
		if toDevice {
			fn = v.ToDevice
		}
		if !v.Available || fn == nil {
			continue
		}
		b.Run(v.Name, func(b *testing.B) { benchSizesOf(b, fn) })
	}
}

// benchSizesOf measures fn over benchSizes on written 64-byte aligned
// buffers.
func benchSizesOf(b *testing.B, fn func(dst, src []byte) int) {
	for _, s := range benchSizes {
		dst, src := benchBuffers(s.n)
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(s.n))
			for b.Loop() {
				fn(dst, src)
			}
		})
	}
}
