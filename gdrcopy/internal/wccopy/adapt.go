//go:build (amd64 || arm64) && !purego

package wccopy

import "unsafe"

// adapt wraps an assembly kernel in the Variant signature.
func adapt(kernel func(dst, src *byte, n int)) func(dst, src []byte) int {
	return func(dst, src []byte) int {
		n := min(len(dst), len(src))
		kernel(unsafe.SliceData(dst), unsafe.SliceData(src), n)
		return n
	}
}
