package wccopy

import "testing"

// benchSizes are the copy sizes of the benchmarks: a fence-dominated call,
// sizes that fit in L1, L2 and the last-level cache, and one that does not.
var benchSizes = []struct {
	name string
	n    int
}{
	{"64B", 64},
	{"4KiB", 4 << 10},
	{"64KiB", 64 << 10},
	{"1MiB", 1 << 20},
	{"16MiB", 16 << 20},
}

// BenchmarkCopy measures Go's copy, the anchor the kernels are compared
// with on ordinary write-back memory.
func BenchmarkCopy(b *testing.B) {
	for _, s := range benchSizes {
		dst, src := aligned(s.n), aligned(s.n)
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(s.n))
			for b.Loop() {
				copy(dst, src)
			}
		})
	}
}

func BenchmarkToDevice(b *testing.B) { benchVariants(b, true) }

func BenchmarkFromDevice(b *testing.B) { benchVariants(b, false) }

// benchVariants measures every available kernel of one direction on
// 64-byte aligned buffers.
func benchVariants(b *testing.B, toDevice bool) {
	for _, v := range Variants() {
		fn := v.FromDevice
		if toDevice {
			fn = v.ToDevice
		}
		if !v.Available || fn == nil {
			continue
		}
		b.Run(v.Name, func(b *testing.B) {
			for _, s := range benchSizes {
				dst, src := aligned(s.n), aligned(s.n)
				b.Run(s.name, func(b *testing.B) {
					b.SetBytes(int64(s.n))
					for b.Loop() {
						fn(dst, src)
					}
				})
			}
		})
	}
}
