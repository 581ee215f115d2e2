//go:build !purego

package wccopy

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The kernels in wccopy_amd64.s. Each copies n bytes from src to dst along
// the WC ladder. The store kernels, which write dst as device memory, end
// with SFENCE; the load kernels, which read src as device memory, end with
// no fence (see "Ordering" in the package comment).

//go:noescape
func storeSSE2(dst, src *byte, n int) (fault uintptr)

//go:noescape
func loadSSE41(dst, src *byte, n int) (fault uintptr)

//go:noescape
func storeAVX2(dst, src *byte, n int) (fault uintptr)

//go:noescape
func loadAVX2(dst, src *byte, n int) (fault uintptr)

//go:noescape
func storeMOVDIR64B(dst, src *byte, n int) (fault uintptr)

// cpuid executes CPUID with EAX = leaf and ECX = subleaf.
func cpuid(leaf, subleaf uint32) (eax, ebx, ecx, edx uint32)

// hasMOVDIR64B reports CPUID.(EAX=7,ECX=0):ECX[bit 28], as gdr_open in
// gdrapi.c reads it. golang.org/x/sys/cpu does not decode this bit, so no
// GODEBUG key controls it; the MOVDIR64B kernel also needs AVX2, and
// GODEBUG=cpu.avx2=off therefore turns it off too.
func hasMOVDIR64B() bool {
	if maxLeaf, _, _, _ := cpuid(0, 0); maxLeaf < 7 {
		return false
	}
	_, _, ecx, _ := cpuid(7, 0)
	return ecx&(1<<28) != 0
}

// Feature gates, fixed at initialisation. They follow golang.org/x/sys/cpu,
// which honours GODEBUG (cpu.avx2=off, cpu.sse41=off, cpu.all=off). SSE2 is
// part of the amd64 baseline.
var (
	useAVX2      = cpu.X86.HasAVX && cpu.X86.HasAVX2
	useMOVDIR64B = useAVX2 && hasMOVDIR64B()
	useSSE41     = cpu.X86.HasSSE41
)

// variants lists the amd64 kernels best first; storeKernel and loadKernel
// in wccopy_amd64.s must test the gates in the same order.
var variants = []Variant{
	{Name: "movdir64b", Available: useMOVDIR64B, ToDevice: adapt(storeMOVDIR64B)},
	{Name: "avx2", Available: useAVX2, ToDevice: adapt(storeAVX2), FromDevice: adapt(loadAVX2)},
	{Name: "sse41", Available: useSSE41, FromDevice: adapt(loadSSE41)},
	{Name: "sse2", Available: true, ToDevice: adapt(storeSSE2)},
	genericVariant,
}

// loadGeneric is where loadKernel goes on a CPU without SSE4.1: the generic
// kernel, whose faults are never returned.
//
//lint:ignore U1000 entered from loadKernel only
func loadGeneric(dst, src *byte, n int) (fault uintptr) {
	fromDeviceGeneric(unsafe.Slice(dst, n), unsafe.Slice(src, n))
	return 0
}

// selected names the kernels tryToDevice and tryFromDevice call.
func selected() (to, from string) {
	switch {
	case useMOVDIR64B:
		to = "movdir64b"
	case useAVX2:
		to = "avx2"
	default:
		to = "sse2"
	}
	switch {
	case useAVX2:
		from = "avx2"
	case useSSE41:
		from = "sse41"
	default:
		from = "generic"
	}
	return to, from
}
