// Package cuda is a minimal binding to the CUDA driver API, for p2pkit's tools
// and hardware tests.
//
// The driver library, libcuda.so.1, is loaded at run time with dlopen, so
// nothing from CUDA is needed to build: the handful of entry points used here
// are declared by hand and looked up with dlsym (by their versioned names, such
// as cuMemAlloc_v2). Without cgo every function returns an error that says so;
// without the library it returns an error wrapping [ErrNoDriver].
//
// CUDA contexts are current per OS thread. Every method of [Context] that talks
// to the GPU therefore locks the calling goroutine to its OS thread, makes the
// context current, does its work and unlocks again, so callers need not call
// runtime.LockOSThread themselves. A caller that wants a context to stay current
// across several calls (for tight timing loops) may lock the thread first; the
// nested lock is harmless.
package cuda

import (
	"errors"
	"fmt"
	"unsafe"
)

var (
	// ErrNoDriver means libcuda.so.1 could not be loaded: there is no NVIDIA
	// driver (or no GPU) on this machine.
	ErrNoDriver = errors.New("cuda: libcuda.so.1 not found")

	// ErrNotSupported means this build cannot reach the CUDA driver at all,
	// because it was built without cgo or for an OS other than Linux.
	ErrNotSupported = errors.New("cuda: not supported")

	// ErrNoDevice matches an [*Error] whose code is CUDA_ERROR_NO_DEVICE: the
	// driver library is present but sees no GPU.
	ErrNoDevice = errors.New("cuda: no CUDA-capable device")
)

// Result is a CUresult, the status code every driver API function returns.
type Result int32

// Result codes this package acts on. See the CUresult enum in cuda.h.
const (
	ErrorNoDevice           Result = 100 // CUDA_ERROR_NO_DEVICE
	ErrorPeerAlreadyEnabled Result = 704 // CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
)

// Error is a failed driver API call.
type Error struct {
	Func string // the driver entry point, e.g. "cuMemAlloc_v2"
	Code Result
	Name string // from cuGetErrorName, e.g. "CUDA_ERROR_OUT_OF_MEMORY"
}

// Error returns "cuda: <function>: <CUresult name> (<number>)".
func (e *Error) Error() string {
	return fmt.Sprintf("cuda: %s: %s (%d)", e.Func, e.Name, int32(e.Code))
}

// Is reports whether e is CUDA_ERROR_NO_DEVICE when target is [ErrNoDevice].
func (e *Error) Is(target error) bool {
	return target == ErrNoDevice && e.Code == ErrorNoDevice
}

// Attribute is a CUdevice_attribute. The values are those of cuda.h; they are
// part of the driver's ABI and never renumbered.
type Attribute int32

// Device attributes used by p2pkit.
const (
	AttrPCIBusID               Attribute = 33 // CU_DEVICE_ATTRIBUTE_PCI_BUS_ID
	AttrPCIDeviceID            Attribute = 34 // CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID
	AttrUnifiedAddressing      Attribute = 41 // CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING
	AttrPCIDomainID            Attribute = 50 // CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID
	AttrComputeCapabilityMajor Attribute = 75 // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
	AttrComputeCapabilityMinor Attribute = 76 // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
	// AttrPageableMemoryAccessUsesHostPageTables is non-zero where the GPU
	// shares the CPU's page tables, i.e. its memory is coherent with the
	// CPU (Grace Hopper); gdrcopy's cuda_wrapper.c
	// gdr_cuda_device_is_coherent reads it.
	AttrPageableMemoryAccessUsesHostPageTables Attribute = 100 // CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES
	AttrGPUDirectRDMASupported                 Attribute = 116 // CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED
	AttrDMABufSupported                        Attribute = 124 // CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
)

// pointerAttrSyncMemops is CU_POINTER_ATTRIBUTE_SYNC_MEMOPS.
const pointerAttrSyncMemops = 6

// memRangeFlagDMABufMappingTypePCIe is
// CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE, a flag of
// cuMemGetHandleForAddressRange.
const memRangeFlagDMABufMappingTypePCIe = 1

// Device is a CUDA device, as numbered by the driver (CUDA_VISIBLE_DEVICES
// applies). Get one with [DeviceGet].
type Device struct {
	ordinal int
	handle  int32 // CUdevice
}

// Ordinal returns the index the device was opened with.
func (d Device) Ordinal() int { return d.ordinal }

// Context is a retained primary context of one device. Release it with
// [Context.Release]. Its methods may be called from any goroutine, but not
// concurrently with Release.
type Context struct {
	dev Device
	ctx unsafe.Pointer // CUcontext, C memory owned by the driver
}

// Device returns the device the context belongs to.
func (c *Context) Device() Device { return c.dev }
