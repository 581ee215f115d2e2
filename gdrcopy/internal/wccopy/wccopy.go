// Package wccopy holds the CPU copy kernels that gdrcopy uses to move data
// to and from GPU memory that gdrdrv maps write-combined (WC) into the
// process through BAR1.
//
// Write-combined memory is uncached. Loads go to the device at the width
// the CPU issues them; stores collect in the core's write-combining buffers
// and reach the device in no guaranteed order until a fence drains them.
// Go's copy is therefore unsuitable: it picks access widths for cached
// memory and issues no fence. The kernels here follow the alignment ladder
// of libgdrapi 2.6 (src/memcpy_*.c, driven by gdr_copy_to_mapping and
// gdr_copy_from_mapping in gdrapi.c):
//
//  1. The alignment of the device-side pointer alone chooses the access
//     width; the host side uses unaligned accesses where it must.
//  2. Fewer than 16 bytes, the head that aligns the device pointer to 16,
//     and the tail are copied with naturally aligned 1, 2, 4 and 8-byte
//     accesses, always the widest one the address and the remaining length
//     allow.
//  3. One 16-byte operation brings the device pointer to 32-byte alignment
//     and one 32-byte operation to 64; the bulk then moves in the widest
//     operation the variant has (64, 32 or 16 bytes), with streaming stores
//     (MOVNTDQ, VMOVNTDQ, MOVDIR64B) or streaming loads (MOVNTDQA,
//     VMOVNTDQA).
//  4. A fence ends every copy. Stores end with SFENCE, as in libgdrapi
//     (wc_store_fence). Loads end with MFENCE, which the Intel SDM entry for
//     MOVNTDQA names for ordering streaming loads from WC memory; libgdrapi
//     issues SFENCE there, and MFENCE only when mappings of several types
//     are live.
//
// On arm64 (Grace Hopper, Grace Blackwell) the ladder is the same, after
// libgdrapi's aarch64 build: the 16- and 32-byte steps are LDP/STP of two
// doublewords (gdrapi.c memcpy_uncached_store_arm64 and
// memcpy_uncached_load_arm64), the bulk is 64-byte LD1/ST1 of four NEON
// registers (src/memcpy_neon.c) where the CPU has ASIMD, and 32-byte
// LDP/STP pairs where it has not. Stores end with DMB ST (wc_store_fence),
// loads with DMB SY (memory_fence), the full barrier that keeps later
// accesses behind them. libgdrapi's LS64 kernels (ST64B, LD64B) are not
// implemented.
//
// The variant is chosen once, at package initialisation, from the features
// golang.org/x/sys/cpu reports, so GODEBUG=cpu.avx2=off, cpu.asimd=off and
// the like select narrower kernels. Variants lists every kernel for tests
// and benchmarks. Builds for other architectures, and builds with the
// purego tag, use the pure-Go "generic" variant, which keeps the
// access-width rules and fences with an atomic read-modify-write but has no
// streaming instructions.
//
// The kernels work on any memory. On ordinary write-back memory streaming
// stores bypass the cache, so they lose to copy while the data would fit in
// cache and win once it would not.
package wccopy

// A Variant is one implementation of the copy kernels.
type Variant struct {
	// Name identifies the variant: "movdir64b", "avx2", "sse41", "sse2"
	// (amd64), "neon", "stp" (arm64) or "generic".
	Name string
	// Available reports whether this CPU (as filtered by GODEBUG) and this
	// build can run the variant.
	Available bool
	// ToDevice is the variant's kernel for stores to device memory, or nil
	// if the variant has none.
	ToDevice func(dst, src []byte) int
	// FromDevice is the variant's kernel for loads from device memory, or
	// nil if the variant has none.
	FromDevice func(dst, src []byte) int
}

// Variants returns every variant this build knows, available or not, in
// order of preference: ToDevice and FromDevice use the first available
// variant that has a kernel for their direction. The last one, "generic",
// is pure Go and always available.
func Variants() []Variant {
	return append([]Variant(nil), variants...)
}

// Selected returns the names of the variants that ToDevice and FromDevice
// use.
func Selected() (toDevice, fromDevice string) {
	return selected()
}

// ToDevice copies min(len(dst), len(src)) bytes from src to dst and returns
// the number of bytes copied, like copy. Dst is device memory mapped
// write-combined; src is ordinary memory. The slices must not overlap.
//
// The alignment of dst chooses every access width (gdr_copy_to_mapping in
// gdrapi.c): copies shorter than 16 bytes, and the head and tail of longer
// ones, use naturally aligned 1, 2, 4 and 8-byte stores; the rest uses
// streaming stores of 16 bytes or more (8-byte stores in the generic
// variant). ToDevice ends with a store fence (SFENCE on amd64, DMB ST on
// arm64): every store it made has left the write-combining buffers and is
// ordered before any store that follows the call. That does not order the data with
// GPU work already running; see the GPUDirect RDMA documentation on
// synchronization.
//
// A memory fault in the copy panics with a [*Fault] where [CatchFaults]
// holds, and is the runtime's otherwise.
func ToDevice(dst, src []byte) int {
	n, fault := tryToDevice(dst, src)
	raise(fault)
	return n
}

// FromDevice copies min(len(dst), len(src)) bytes from src to dst and
// returns the number of bytes copied, like copy. Src is device memory mapped
// write-combined; dst is ordinary memory. The slices must not overlap.
//
// The alignment of src chooses every access width (gdr_copy_from_mapping in
// gdrapi.c): copies shorter than 16 bytes, and the head and tail of longer
// ones, use naturally aligned 1, 2, 4 and 8-byte loads; the rest uses
// streaming loads of 16 or 32 bytes (8-byte loads in the generic variant).
// FromDevice ends with a full fence (MFENCE on amd64, which the Intel SDM
// prescribes for streaming loads from WC memory; DMB SY on arm64), so no
// later access passes them.
//
// A memory fault panics as in ToDevice.
func FromDevice(dst, src []byte) int {
	n, fault := tryFromDevice(dst, src)
	raise(fault)
	return n
}

// Store32 stores v at p, device memory, with one naturally aligned 4-byte
// store, and fences as ToDevice does: the store of a flag or a doorbell,
// without the copy ladder. p must be 4-byte aligned.
func Store32(p *uint32, v uint32) { raise(store32(p, v)) }

// Store64 is Store32 for an 8-byte aligned 8-byte word.
func Store64(p *uint64, v uint64) { raise(store64(p, v)) }

// Load32 loads the 4-byte word at p, device memory, with one naturally
// aligned load, and fences as FromDevice does. p must be 4-byte aligned.
func Load32(p *uint32) uint32 {
	v, fault := load32(p)
	raise(fault)
	return v
}

// Load64 is Load32 for an 8-byte aligned 8-byte word.
func Load64(p *uint64) uint64 {
	v, fault := load64(p)
	raise(fault)
	return v
}
