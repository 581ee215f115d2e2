//go:build (!amd64 && !arm64) || purego

package wccopy

// variants is the registry for builds without assembly: every GOARCH but
// amd64 and arm64, and the purego tag.
var variants = []Variant{genericVariant}

// tryToDevice is ToDevice's implementation: the generic kernel, whose
// faults are never returned.
func tryToDevice(dst, src []byte) (int, uintptr) { return toDeviceGeneric(dst, src), 0 }

// tryFromDevice is FromDevice's implementation: the generic kernel.
func tryFromDevice(dst, src []byte) (int, uintptr) { return fromDeviceGeneric(dst, src), 0 }

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
