//go:build (amd64 || arm64) && !purego

package wccopy

import "unsafe"

// adapt wraps an assembly kernel in the Variant signature; a fault the
// kernel returns is raised as ToDevice raises it.
func adapt(kernel func(dst, src *byte, n int) uintptr) func(dst, src []byte) int {
	return func(dst, src []byte) int {
		n := min(len(dst), len(src))
		raise(kernel(unsafe.SliceData(dst), unsafe.SliceData(src), n))
		return n
	}
}
