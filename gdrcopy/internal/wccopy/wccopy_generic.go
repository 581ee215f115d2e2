//go:build (!amd64 && !arm64) || purego

package wccopy

import "unsafe"

// variants is the registry for builds without assembly: every GOARCH but
// amd64 and arm64, and the purego tag.
var variants = []Variant{genericVariant}

// storeKernel and loadKernel are the copy kernels of ToDevice and
// FromDevice: the generic ones, whose faults are never returned.
func storeKernel(dst, src *byte, n int) uintptr {
	toDeviceGeneric(unsafe.Slice(dst, n), unsafe.Slice(src, n))
	return 0
}

func loadKernel(dst, src *byte, n int) uintptr {
	fromDeviceGeneric(unsafe.Slice(dst, n), unsafe.Slice(src, n))
	return 0
}

// installFaultHandler reports that no kernel here returns its faults.
func installFaultHandler() bool { return false }

// selected names the kernels tryToDevice and tryFromDevice call.
func selected() (to, from string) { return "generic", "generic" }

// The word kernels of the generic variant: one access between the fences
// the package comment's "Ordering" asks of it. The stores fence before, so
// that no earlier access passes them, and after, as ToDevice does.

func store32(p *uint32, v uint32) uintptr { fence(); *p = v; fence(); return 0 }

func store64(p *uint64, v uint64) uintptr { fence(); *p = v; fence(); return 0 }

func load32(p *uint32) (uint32, uintptr) { v := *p; fence(); return v, 0 }

func load64(p *uint64) (uint64, uintptr) { v := *p; fence(); return v, 0 }
