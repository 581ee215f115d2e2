// Package gdrcopy is a pure-Go client of gdrdrv, the kernel module of NVIDIA
// GDRCopy: it pins CUDA device memory, maps its BAR1 pages into the process
// and lets the CPU load and store them directly, which beats cudaMemcpy by
// microseconds for small transfers. It speaks to /dev/gdrdrv with ioctl and
// mmap, like libgdrapi 2.6, and needs neither cgo nor libgdrapi.
//
// The flow is [Open], [Driver.Pin], [Buffer.Map], then copies through the
// [Mapping]. Every type has an idempotent Close; closing a Driver releases
// every Buffer and Mapping still open through it.
//
// # Requirements
//
// gdrdrv 2.0 or later must be loaded and /dev/gdrdrv readable and writable
// by the caller (insmod.sh creates it with mode 0666). Newer drivers unlock
// more: GET_INFO_V2 from 2.4; attributes, PIN_BUFFER_V2, FORCE_PCIE pins and
// mapping-type requests from 2.5. Device memory must come from cuMemAlloc,
// cudaMalloc or cuMemCreate with gpuDirectRDMACapable set, on a GPU that
// supports GPUDirect RDMA (not GeForce), and should have
// CU_POINTER_ATTRIBUTE_SYNC_MEMOPS set so that synchronous CUDA copies are
// ordered with BAR accesses; this package does not set it.
//
// # DMA-BUF
//
// Where gdrdrv is not loaded, [OpenOptions] can reach GPU memory without
// it, as libgdrapi 2.6 does (GDRCOPY_USE_DMABUF_MMAP): the caller supplies
// an [Exporter] that exports the range as a dma-buf
// (cuMemGetHandleForAddressRange), and the Buffer maps the dma-buf's
// descriptor behind the same [Mapping] API. The order is gdrdrv first, then
// DMA-BUF when gdrdrv is absent; [Options.ForceDMABUF] goes to DMA-BUF
// directly. The NVIDIA driver must be able to map its dma-bufs for the CPU,
// which libgdrapi expects from CUDA 13.3 drivers on; older ones export but
// refuse the mmap (errno 524, ENOTSUPP), and [Buffer.Map] returns an error
// matching [ErrNotSupported] that says so.
//
// # Alignment
//
// gdrdrv works in 64 KiB GPU pages. [Driver.Pin] accepts any address and
// rounds the pinned range out to whole GPU pages, but gdrdrv maps a pin only
// from the start of its first GPU page and refuses one that starts inside a
// page (gdrdrv.c gdrdrv_mmap: "offset != 0 is not supported"), because the
// rest of that page may belong to another allocation. To map memory,
// over-allocate by 64 KiB and pin from the first 64 KiB boundary, as
// gdrcopy's own tests do. [Buffer.Map] reports [ErrUnaligned] otherwise.
//
// # Invalidation
//
// When gdrdrv runs in non-persistent mode (the default before 2.5) and the
// CUDA allocation is freed while pinned, the NVIDIA driver calls gdrdrv's
// free callback, which sets the buffer's callback flag and tears down the
// mapping; any later access to it raises SIGBUS. Copies through a [Mapping]
// then catch that fault (see "Faults") and return [ErrInvalidated], and every later copy fails fast on a flag. Checking the
// driver's flag with an ioctl before every copy would cost more than a small
// copy itself; libgdrapi does not check it on copies either and leaves
// gdr_get_callback_flag to the caller, which is [Buffer.Invalidated] here.
//
// In persistent mode (the default since 2.5, see [Attributes]) freeing does
// not invalidate: the mapping keeps reading the old data until unpinned.
// gdrdrv then never tears down a live mapping, yet copies still catch
// faults, so that one nobody expected (a GPU reset, a driver bug) becomes an
// error matching [ErrFault] rather than a crash. Drivers older than 2.5
// cannot say which mode they run in and are treated as non-persistent.
//
// # Faults
//
// On Linux amd64 and arm64 the copy kernels return a fault instead of
// raising it: while one runs it keeps a mark in two registers, and a
// SIGSEGV/SIGBUS handler that the first mapping installs in front of the Go
// runtime's resumes a faulting kernel at a fixup that returns the fault
// address, in the manner of the Linux kernel's exception tables for
// copy_from_user (arch/x86/mm/extable.c). The handler passes every other
// fault to the runtime's handler unchanged, so Go code behaves exactly as
// before, SetPanicOnFault included. A copy then costs one atomic load of the
// mapping's state and a bounds check on top of its kernel (BenchmarkCopy
// measures it). Copies on caching mappings (Go's copy), builds with the
// purego tag or for other architectures, and a process whose SIGSEGV or
// SIGBUS has no handler to pass faults on to, use a fault guard instead:
// runtime/debug.SetPanicOnFault around the copy and a deferred recover,
// about 5 ns more per copy.
//
// # Ordering
//
// Write-combining memory is weakly ordered: stores wait in the CPU's
// write-combining buffers and reach the GPU in any order, and loads may be
// performed early and in any order (Intel SDM vol. 3A, "Memory Types and
// Their Properties"; on arm64 Normal Non-cacheable memory, Arm ARM "Memory
// types and attributes"). The copies and words fence only where the
// publication of data needs it, with the rules they rely on set out in the
// package comment of gdrcopy/internal/wccopy:
//
//   - [Mapping.CopyToDevice] ends with a store fence (SFENCE; DMB ST on
//     arm64): its stores reach the GPU before any later store of this
//     thread.
//   - [Mapping.StoreUint32] and [Mapping.StoreUint64] store after every
//     earlier load, and after the stores of every earlier CopyToDevice and
//     Store, and before any later store.
//   - [Mapping.LoadUint32] and [Mapping.LoadUint64] load before every later
//     load and store, the streaming loads of a later CopyFromDevice
//     included (MFENCE; DMB LD on arm64), and their fence orders the loads
//     of earlier copies before what follows too.
//   - [Mapping.CopyFromDevice] fences nothing, as gdr_copy_from_mapping
//     does not (libgdrapi 2.6 issues SFENCE there on x86 and DMB ST on
//     arm64, which order no load): its loads may be performed in any order
//     with other loads, and on x86 may return bytes that an earlier copy of
//     the same 64-byte line left in a streaming-load buffer.
//
// On a caching mapping the copies are Go's copy, without fences, on
// coherent memory; the words keep their fences and their guarantees (on
// arm64 the Store words are store-releases, which order every earlier
// store, a plain copy's included).
//
// So to hand data to the GPU, copy it and then store the flag; to take
// data from the GPU, poll the flag with a Load, then copy the data, then
// store the acknowledgement. A flag polled with CopyFromDevice orders
// nothing. These order the CPU's own accesses; ordering them with GPU work
// is the business of the GPU side (see the GPUDirect RDMA documentation on
// synchronization).
//
// # Concurrency
//
// All types are safe for concurrent use. Copies take no lock at all: copies
// on distinct mappings, or on the same one, run in parallel with no
// process-wide lock (libgdrapi itself is not thread-safe and NCCL
// serialises it globally). Closing a [Mapping] (directly, or through its
// Buffer or Driver) replaces the mapping at once with an inaccessible
// reservation of the same addresses, so a copy racing with Close either
// completes before it or faults on the reservation and fails with an error
// matching [io/fs.ErrClosed]; no copy touches the memory once Close has
// returned, and the addresses are not reused while a copy may still run on
// them.
//
// # Processes
//
// gdrdrv serves only the thread group that opened the device node: ioctl and
// mmap from any other process fail with EACCES (gdrdrv.c
// gdrdrv_check_same_process), and mappings are not inherited across fork
// (VM_DONTCOPY). A descriptor inherited by a child or received over
// SCM_RIGHTS is therefore useless; such errors match [ErrForeignProcess].
// The device is opened with O_CLOEXEC so that exec does not leak it.
//
// # Errors
//
// Errors wrap the few sentinels of this package where one applies, and the
// kernel's errno otherwise; errors.Is matches [io/fs.ErrNotExist] and
// [io/fs.ErrPermission] where the errno means that.
package gdrcopy
