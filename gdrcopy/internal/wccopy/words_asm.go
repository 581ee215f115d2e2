//go:build (amd64 || arm64) && !purego

package wccopy

// The word kernels in wccopy_amd64.s and wccopy_arm64.s.

//go:noescape
func store32(p *uint32, v uint32)

//go:noescape
func store64(p *uint64, v uint64)

//go:noescape
func load32(p *uint32) uint32

//go:noescape
func load64(p *uint64) uint64
