//go:build (!amd64 && !arm64) || purego

package wccopy

// variants is the registry for builds without assembly: every GOARCH but
// amd64 and arm64, and the purego tag.
var variants = []Variant{genericVariant}

// toDevice is ToDevice's implementation: the generic kernel.
func toDevice(dst, src []byte) int { return toDeviceGeneric(dst, src) }

// fromDevice is FromDevice's implementation: the generic kernel.
func fromDevice(dst, src []byte) int { return fromDeviceGeneric(dst, src) }

// selected names the kernels toDevice and fromDevice call.
func selected() (to, from string) { return "generic", "generic" }

// The word kernels of the generic variant: one access, then the fence.

func store32(p *uint32, v uint32) { *p = v; fence() }

func store64(p *uint64, v uint64) { *p = v; fence() }

func load32(p *uint32) uint32 { v := *p; fence(); return v }

func load64(p *uint64) uint64 { v := *p; fence(); return v }
