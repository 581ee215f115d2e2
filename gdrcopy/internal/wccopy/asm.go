//go:build (amd64 || arm64) && !purego

package wccopy

// The word kernels in wccopy_amd64.s and wccopy_arm64.s. Each returns the
// address of a fault it took (see fault.go), or 0.

//go:noescape
func store32(p *uint32, v uint32) (fault uintptr)

//go:noescape
func store64(p *uint64, v uint64) (fault uintptr)

//go:noescape
func load32(p *uint32) (v uint32, fault uintptr)

//go:noescape
func load64(p *uint64) (v uint64, fault uintptr)

// storeKernel and loadKernel are the copy kernels ToDevice and FromDevice
// call: each jumps to the kernel of the variant its gates chose, so that a
// copy is one assembly call with no Go frame of this package in between.
//
//go:noescape
func storeKernel(dst, src *byte, n int) (fault uintptr)

//go:noescape
func loadKernel(dst, src *byte, n int) (fault uintptr)
