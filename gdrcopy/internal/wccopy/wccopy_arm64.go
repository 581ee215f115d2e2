//go:build !purego

package wccopy

import "golang.org/x/sys/cpu"

// The kernels in wccopy_arm64.s. Each copies n bytes from src to dst along
// the WC ladder. The store kernels, which write dst as device memory, end
// with DMB ST; the load kernels, which read src as device memory, end with
// no barrier (see "Ordering" in the package comment). libgdrapi's LS64
// kernels (ST64B, LD64B, src/memcpy_ls64.c) are not here: no emulator or
// host available to this package's tests has FEAT_LS64 to check them on.

//go:noescape
func storeNEON(dst, src *byte, n int) (fault uintptr)

//go:noescape
func loadNEON(dst, src *byte, n int) (fault uintptr)

//go:noescape
func storeSTP(dst, src *byte, n int) (fault uintptr)

//go:noescape
func loadSTP(dst, src *byte, n int) (fault uintptr)

// useNEON follows golang.org/x/sys/cpu, which reads HWCAP_ASIMD as
// gdrapi.c gdr_init_cpu_flags does and honours GODEBUG=cpu.asimd=off.
var useNEON = cpu.ARM64.HasASIMD

// variants lists the arm64 kernels best first; storeKernel and loadKernel
// in wccopy_arm64.s must test the gate in the same order.
var variants = []Variant{
	{Name: "neon", Available: useNEON, ToDevice: adapt(storeNEON), FromDevice: adapt(loadNEON)},
	{Name: "stp", Available: true, ToDevice: adapt(storeSTP), FromDevice: adapt(loadSTP)},
	genericVariant,
}

// selected names the kernels tryToDevice and tryFromDevice call.
func selected() (to, from string) {
	if useNEON {
		return "neon", "neon"
	}
	return "stp", "stp"
}
