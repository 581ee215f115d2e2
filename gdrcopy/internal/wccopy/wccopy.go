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
//     operation the variant has (64, 32 or 16 bytes), with streaming loads
//     (MOVNTDQA, VMOVNTDQA) from the device. To the device, whole 64-byte
//     lines go with streaming stores (MOVNTDQ, VMOVNTDQ, MOVDIR64B), as in
//     libgdrapi, and the 16- and 32-byte operations that fill part of a line
//     (the alignment steps and what is left after the last whole line) with
//     plain vector stores (MOVDQU, VMOVDQU), where libgdrapi streams them
//     too. On the memory types gdrdrv maps, the two are the same store: on
//     WC memory a streaming store and the region have the same semantics,
//     and on UC memory the memory type overrides the hint (Intel 64 and
//     IA-32 Architectures Optimization Reference Manual, "Memory Type and
//     Non-temporal Stores"; SDM vol. 2, MOVNTDQ). On write-back memory
//     (a DMA-BUF of host memory, the tests) they differ: a streaming store
//     of part of a line goes to memory as a partial write, which the
//     SFENCE that ends the copy then waits for, about 150 ns a copy on the
//     EPYC machine of the README's copies table against about 1 ns for a
//     plain store that stays in the cache (scripts/ntstore-sfence.c).
//  4. A store fence ends every copy to the device: SFENCE, as in libgdrapi
//     (wc_store_fence). A copy from the device ends with none: libgdrapi
//     issues SFENCE there, which orders no load, and a load fence would
//     double the cost of a small read (see "Ordering").
//
// On arm64 (Grace Hopper, Grace Blackwell) the ladder is the same, after
// libgdrapi's aarch64 build: the 16- and 32-byte steps are LDP/STP of two
// doublewords (gdrapi.c memcpy_uncached_store_arm64 and
// memcpy_uncached_load_arm64), the bulk is 64-byte LD1/ST1 of four NEON
// registers (src/memcpy_neon.c) where the CPU has ASIMD, and 32-byte
// LDP/STP pairs where it has not. Copies to the device end with DMB ST
// (wc_store_fence); copies from it end with no barrier, as DMB ST, which
// libgdrapi issues there, orders no load. libgdrapi's LS64 kernels (ST64B,
// LD64B) are not implemented.
//
// # Ordering
//
// gdrdrv maps GPU memory write-combining: on x86 through the page attribute
// table (gdrdrv.c pgprot_modify_writecombine sets PWT, which Linux's PAT
// layout makes WC; where the kernel runs without PAT the same bits give
// UC), on arm64 as Normal Non-cacheable (pgprot_writecombine), and on
// platforms that must use device mappings, such as BlueField-3, as
// Device-nGnRE (pgprot_device). The rules these kernels rest on:
//
//   - x86 WC memory is weakly ordered and may be read speculatively (Intel
//     SDM vol. 3A, "Methods of Caching Available", table "Memory Types and
//     Their Properties"); stores to it wait in write-combining buffers,
//     which drain in no guaranteed order until a serializing event such as
//     SFENCE or MFENCE ("Buffering of Write Combining Memory Locations").
//     UC memory is strongly ordered and never read speculatively.
//   - MOVNTDQA from WC memory may be served from a streaming-load buffer
//     that holds the rest of a 64-byte line, and those buffers are not
//     snooped (SDM vol. 1, "Streaming Load Hint Instruction"); the SDM
//     prescribes MFENCE to synchronize such loads with writes by other
//     agents (vol. 2, MOVNTDQA). On WB and UC memory the hint changes
//     nothing: the memory type decides.
//   - SFENCE orders every earlier store, streaming stores and MOVDIR64B
//     included, before every later store; MFENCE orders every earlier load
//     and store before every later one (vol. 2, SFENCE, MFENCE). An x86
//     store is committed only after every earlier instruction has completed
//     (AMD64 APM vol. 1, "Accessing Memory": speculative and out-of-order
//     writes are not allowed), so no store passes an earlier load.
//   - Normal Non-cacheable memory is weakly ordered and may be read
//     speculatively; Device-nGnRE memory is not read speculatively and
//     reaches one peripheral in program order, but is not ordered with
//     Normal memory (Arm ARM, "Memory types and attributes"). DMB ST orders
//     earlier stores before later stores, DMB LD earlier loads before later
//     loads and stores, and a store-release (STLR) every earlier load and
//     store before itself (Arm ARM, "Data Memory Barrier", "Load-Acquire,
//     Store-Release"). The kernels need ordering, not completion, so none
//     issues DSB.
//
// From these, each function guarantees, on both architectures:
//
//   - ToDevice: every store it made is ordered before every store after
//     it (SFENCE, DMB ST), and on x86 has left the write-combining buffers.
//   - Store32, Store64: the word's store is ordered after every earlier
//     load, and after the stores of every earlier ToDevice and Store call
//     (which fenced them), and before every later store: on amd64 a plain
//     store then SFENCE, on arm64 STLR then DMB ST. Data copied with
//     ToDevice and then flagged with Store32 reaches the device before the
//     flag.
//   - Load32, Load64: the word's load is ordered before every later load
//     and store, the streaming loads of a later FromDevice included: on
//     amd64 MFENCE, on arm64 DMB LD. A flag polled with Load32 and then
//     data read with FromDevice gives the data the device wrote before the
//     flag.
//   - FromDevice: nothing. Its loads may be performed in any order, before
//     those of an earlier FromDevice, and, on arm64, after later stores; on
//     x86 it may return bytes a streaming-load buffer kept from an earlier
//     FromDevice of the same 64-byte line. Poll flags with Load32 or
//     Load64, whose fence also orders every earlier FromDevice's loads
//     before what follows it, and publish with Store32 or Store64.
//
// The variant is chosen once, at package initialisation, from the features
// golang.org/x/sys/cpu reports, so GODEBUG=cpu.avx2=off, cpu.asimd=off and
// the like select narrower kernels. Variants lists every kernel for tests
// and benchmarks. Builds for other architectures, and builds with the
// purego tag, use the pure-Go "generic" variant, which keeps the
// access-width rules but has no streaming instructions and no fence
// instruction (see fence in generic.go).
//
// The kernels work on any memory. On ordinary write-back memory, where
// every rule above is stronger, streaming stores bypass the cache, so they
// lose to copy while the data would fit in cache and win once it would not.
package wccopy

import "unsafe"

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
// ordered before any store that follows the call (see "Ordering" in the
// package comment). That does not order the data with GPU work already
// running; see the GPUDirect RDMA documentation on synchronization.
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
// FromDevice ends with no fence and orders its loads with nothing, as
// libgdrapi's copy does; poll a flag with Load32 or Load64, whose fence
// orders the loads that follow (see "Ordering" in the package comment).
//
// A memory fault panics as in ToDevice.
func FromDevice(dst, src []byte) int {
	n, fault := tryFromDevice(dst, src)
	raise(fault)
	return n
}

// Store32 stores v at p, device memory, with one naturally aligned 4-byte
// store: the store of a flag or a doorbell, without the copy ladder. The
// store is ordered after every earlier load and after the stores of earlier
// ToDevice and Store calls, and before every later store (a plain store
// then SFENCE on amd64, STLR then DMB ST on arm64). p must be 4-byte
// aligned.
func Store32(p *uint32, v uint32) { raise(store32(p, v)) }

// Store64 is Store32 for an 8-byte aligned 8-byte word.
func Store64(p *uint64, v uint64) { raise(store64(p, v)) }

// Load32 loads the 4-byte word at p, device memory, with one naturally
// aligned load, ordered before every later load and store, including the
// streaming loads of a later FromDevice (MFENCE on amd64, DMB LD on
// arm64): poll a flag with it, then copy the data the flag guards. p must
// be 4-byte aligned.
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

// tryToDevice is ToDevice's implementation. It calls the kernel directly
// rather than through a func value, so that dst and src do not escape.
func tryToDevice(dst, src []byte) (int, uintptr) {
	n := min(len(dst), len(src))
	return n, storeKernel(unsafe.SliceData(dst), unsafe.SliceData(src), n)
}

// tryFromDevice is FromDevice's implementation, as tryToDevice.
func tryFromDevice(dst, src []byte) (int, uintptr) {
	n := min(len(dst), len(src))
	return n, loadKernel(unsafe.SliceData(dst), unsafe.SliceData(src), n)
}
