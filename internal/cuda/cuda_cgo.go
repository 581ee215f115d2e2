//go:build cgo && linux

package cuda

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>

// The few CUDA driver API types used here, declared by hand so that building
// needs nothing from CUDA. CUdeviceptr is 64 bits on every 64-bit target.
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;

static void *cu_lib;

static CUresult (*p_cuInit)(unsigned int);
static CUresult (*p_cuDriverGetVersion)(int *);
static CUresult (*p_cuGetErrorName)(CUresult, const char **);
static CUresult (*p_cuDeviceGetCount)(int *);
static CUresult (*p_cuDeviceGet)(CUdevice *, int);
static CUresult (*p_cuDeviceGetName)(char *, int, CUdevice);
static CUresult (*p_cuDeviceGetPCIBusId)(char *, int, CUdevice);
static CUresult (*p_cuDeviceGetAttribute)(int *, int, CUdevice);
static CUresult (*p_cuDeviceTotalMem)(size_t *, CUdevice);
static CUresult (*p_cuDeviceCanAccessPeer)(int *, CUdevice, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxRelease)(CUdevice);
static CUresult (*p_cuCtxSetCurrent)(CUcontext);
static CUresult (*p_cuCtxSynchronize)(void);
static CUresult (*p_cuCtxEnablePeerAccess)(CUcontext, unsigned int);
static CUresult (*p_cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*p_cuMemFree)(CUdeviceptr);
static CUresult (*p_cuMemHostAlloc)(void **, size_t, unsigned int);
static CUresult (*p_cuMemFreeHost)(void *);
static CUresult (*p_cuPointerSetAttribute)(const void *, int, CUdeviceptr);
static CUresult (*p_cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
static CUresult (*p_cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
static CUresult (*p_cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
static CUresult (*p_cuMemcpyPeer)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
// Optional: CUDA 11.7 and later. NULL where the driver lacks it.
static CUresult (*p_cuMemGetHandleForAddressRange)(void *, CUdeviceptr, size_t, int, unsigned long long);

// cu_load opens the driver and resolves every symbol. It returns 0 on success,
// 1 when dlopen failed (*what is dlerror()), 2 when a symbol is missing (*what
// is its name).
static int cu_load(const char **what) {
	cu_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (cu_lib == NULL) {
		*what = dlerror();
		return 1;
	}
#define CU_SYM(ptr, name) \
	if ((*(void **)(&ptr) = dlsym(cu_lib, name)) == NULL) { *what = name; return 2; }
	CU_SYM(p_cuInit, "cuInit")
	CU_SYM(p_cuDriverGetVersion, "cuDriverGetVersion")
	CU_SYM(p_cuGetErrorName, "cuGetErrorName")
	CU_SYM(p_cuDeviceGetCount, "cuDeviceGetCount")
	CU_SYM(p_cuDeviceGet, "cuDeviceGet")
	CU_SYM(p_cuDeviceGetName, "cuDeviceGetName")
	CU_SYM(p_cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId")
	CU_SYM(p_cuDeviceGetAttribute, "cuDeviceGetAttribute")
	CU_SYM(p_cuDeviceTotalMem, "cuDeviceTotalMem_v2")
	CU_SYM(p_cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer")
	CU_SYM(p_cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")
	CU_SYM(p_cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2")
	CU_SYM(p_cuCtxSetCurrent, "cuCtxSetCurrent")
	CU_SYM(p_cuCtxSynchronize, "cuCtxSynchronize")
	CU_SYM(p_cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess")
	CU_SYM(p_cuMemAlloc, "cuMemAlloc_v2")
	CU_SYM(p_cuMemFree, "cuMemFree_v2")
	CU_SYM(p_cuMemHostAlloc, "cuMemHostAlloc")
	CU_SYM(p_cuMemFreeHost, "cuMemFreeHost")
	CU_SYM(p_cuPointerSetAttribute, "cuPointerSetAttribute")
	CU_SYM(p_cuMemcpyHtoD, "cuMemcpyHtoD_v2")
	CU_SYM(p_cuMemcpyDtoH, "cuMemcpyDtoH_v2")
	CU_SYM(p_cuMemsetD8, "cuMemsetD8_v2")
	CU_SYM(p_cuMemcpyPeer, "cuMemcpyPeer")
#undef CU_SYM
	*(void **)(&p_cuMemGetHandleForAddressRange) = dlsym(cu_lib, "cuMemGetHandleForAddressRange");
	return 0;
}

static const char *cu_error_name(CUresult r) {
	const char *s = NULL;
	if (p_cuGetErrorName(r, &s) != 0) return NULL;
	return s;
}

static CUresult cu_init(void) { return p_cuInit(0); }
static CUresult cu_driver_version(int *v) { return p_cuDriverGetVersion(v); }
static CUresult cu_device_count(int *n) { return p_cuDeviceGetCount(n); }
static CUresult cu_device_get(CUdevice *d, int i) { return p_cuDeviceGet(d, i); }
static CUresult cu_device_name(char *s, int n, CUdevice d) { return p_cuDeviceGetName(s, n, d); }
static CUresult cu_device_pci_bus_id(char *s, int n, CUdevice d) { return p_cuDeviceGetPCIBusId(s, n, d); }
static CUresult cu_device_attribute(int *v, int a, CUdevice d) { return p_cuDeviceGetAttribute(v, a, d); }
static CUresult cu_device_total_mem(size_t *v, CUdevice d) { return p_cuDeviceTotalMem(v, d); }
static CUresult cu_device_can_access_peer(int *v, CUdevice d, CUdevice p) { return p_cuDeviceCanAccessPeer(v, d, p); }
static CUresult cu_primary_ctx_retain(CUcontext *c, CUdevice d) { return p_cuDevicePrimaryCtxRetain(c, d); }
static CUresult cu_primary_ctx_release(CUdevice d) { return p_cuDevicePrimaryCtxRelease(d); }
static CUresult cu_ctx_set_current(CUcontext c) { return p_cuCtxSetCurrent(c); }
static CUresult cu_ctx_synchronize(void) { return p_cuCtxSynchronize(); }
static CUresult cu_ctx_enable_peer_access(CUcontext peer) { return p_cuCtxEnablePeerAccess(peer, 0); }
static CUresult cu_mem_alloc(CUdeviceptr *p, size_t n) { return p_cuMemAlloc(p, n); }
static CUresult cu_mem_free(CUdeviceptr p) { return p_cuMemFree(p); }
static CUresult cu_mem_host_alloc(void **p, size_t n) { return p_cuMemHostAlloc(p, n, 0); }
static CUresult cu_mem_free_host(void *p) { return p_cuMemFreeHost(p); }
static CUresult cu_pointer_set_flag(int attr, CUdeviceptr p) {
	unsigned int one = 1;
	return p_cuPointerSetAttribute(&one, attr, p);
}
static CUresult cu_memcpy_htod(CUdeviceptr d, const void *h, size_t n) { return p_cuMemcpyHtoD(d, h, n); }
static CUresult cu_memcpy_dtoh(void *h, CUdeviceptr d, size_t n) { return p_cuMemcpyDtoH(h, d, n); }
static CUresult cu_memset_d8(CUdeviceptr d, unsigned char v, size_t n) { return p_cuMemsetD8(d, v, n); }
static int cu_has_mem_get_handle(void) { return p_cuMemGetHandleForAddressRange != NULL; }
static CUresult cu_mem_get_handle_dmabuf(int *fd, CUdeviceptr p, size_t n, unsigned long long flags) {
	// 1 is CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD.
	return p_cuMemGetHandleForAddressRange(fd, p, n, 1, flags);
}
static CUresult cu_memcpy_peer(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n) {
	return p_cuMemcpyPeer(dst, dc, src, sc, n);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/p2pkit/p2pkit/pcie"
)

var (
	initOnce sync.Once
	initErr  error
)

// Init loads libcuda.so.1 and calls cuInit. It runs once; every other function
// calls it, so calling it explicitly is only needed to test for a driver.
// Without the library it returns an error wrapping [ErrNoDriver]; with the
// library but no GPU, an [*Error] that matches [ErrNoDevice].
func Init() error {
	initOnce.Do(func() {
		var what *C.char
		switch C.cu_load(&what) {
		case 0:
		case 1:
			initErr = fmt.Errorf("%w: %s", ErrNoDriver, C.GoString(what))
			return
		default:
			initErr = fmt.Errorf("cuda: libcuda.so.1 has no symbol %s (driver too old?)", C.GoString(what))
			return
		}
		initErr = check("cuInit", C.cu_init())
	})
	return initErr
}

// check turns a CUresult into nil or an [*Error] named after fn.
func check(fn string, r C.CUresult) error {
	if r == 0 {
		return nil
	}
	name := "CUDA_ERROR_UNKNOWN"
	if s := C.cu_error_name(r); s != nil {
		name = C.GoString(s)
	}
	return &Error{Func: fn, Code: Result(r), Name: name}
}

// DriverVersion returns the CUDA version the driver supports, as
// 1000*major + 10*minor (13000 for CUDA 13.0).
func DriverVersion() (int, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var v C.int
	if err := check("cuDriverGetVersion", C.cu_driver_version(&v)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// DeviceCount returns the number of CUDA devices visible to this process.
func DeviceCount() (int, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var n C.int
	if err := check("cuDeviceGetCount", C.cu_device_count(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// DeviceGet returns the device with the given ordinal (cuDeviceGet).
func DeviceGet(ordinal int) (Device, error) {
	if err := Init(); err != nil {
		return Device{}, err
	}
	var d C.CUdevice
	if err := check("cuDeviceGet", C.cu_device_get(&d, C.int(ordinal))); err != nil {
		return Device{}, err
	}
	return Device{ordinal: ordinal, handle: int32(d)}, nil
}

// Name returns the marketing name, e.g. "NVIDIA H200".
func (d Device) Name() (string, error) {
	var buf [256]C.char
	if err := check("cuDeviceGetName", C.cu_device_name(&buf[0], C.int(len(buf)), C.CUdevice(d.handle))); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

// PCIBusID returns the device's PCI address (cuDeviceGetPCIBusId), in
// canonical form whatever the driver's spelling.
func (d Device) PCIBusID() (pcie.Address, error) {
	var buf [32]C.char
	if err := check("cuDeviceGetPCIBusId", C.cu_device_pci_bus_id(&buf[0], C.int(len(buf)), C.CUdevice(d.handle))); err != nil {
		return pcie.Address{}, err
	}
	a, err := pcie.ParseAddress(strings.ToLower(C.GoString(&buf[0])))
	if err != nil {
		return pcie.Address{}, fmt.Errorf("cuda: cuDeviceGetPCIBusId: %w", err)
	}
	return a, nil
}

// Attribute returns one device attribute (cuDeviceGetAttribute).
func (d Device) Attribute(a Attribute) (int, error) {
	var v C.int
	if err := check("cuDeviceGetAttribute", C.cu_device_attribute(&v, C.int(a), C.CUdevice(d.handle))); err != nil {
		return 0, fmt.Errorf("attribute %d: %w", a, err)
	}
	return int(v), nil
}

// TotalMem returns the device memory size in bytes (cuDeviceTotalMem_v2).
func (d Device) TotalMem() (uint64, error) {
	var v C.size_t
	if err := check("cuDeviceTotalMem_v2", C.cu_device_total_mem(&v, C.CUdevice(d.handle))); err != nil {
		return 0, err
	}
	return uint64(v), nil
}

// CanAccessPeer reports whether d can map peer's memory (cuDeviceCanAccessPeer).
func (d Device) CanAccessPeer(peer Device) (bool, error) {
	var v C.int
	if err := check("cuDeviceCanAccessPeer", C.cu_device_can_access_peer(&v, C.CUdevice(d.handle), C.CUdevice(peer.handle))); err != nil {
		return false, err
	}
	return v != 0, nil
}

// RetainPrimaryContext retains the device's primary context
// (cuDevicePrimaryCtxRetain). Pair it with [Context.Release].
func (d Device) RetainPrimaryContext() (*Context, error) {
	var c C.CUcontext
	if err := check("cuDevicePrimaryCtxRetain", C.cu_primary_ctx_retain(&c, C.CUdevice(d.handle))); err != nil {
		return nil, err
	}
	return &Context{dev: d, ctx: unsafe.Pointer(c)}, nil
}

// Release drops the reference taken by RetainPrimaryContext
// (cuDevicePrimaryCtxRelease_v2). It is idempotent.
func (c *Context) Release() error {
	if c.ctx == nil {
		return nil
	}
	c.ctx = nil
	return check("cuDevicePrimaryCtxRelease_v2", C.cu_primary_ctx_release(C.CUdevice(c.dev.handle)))
}

// do runs f on a locked OS thread with c current.
func (c *Context) do(f func() error) error {
	if c.ctx == nil {
		return fmt.Errorf("cuda: context of device %d already released", c.dev.ordinal)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := check("cuCtxSetCurrent", C.cu_ctx_set_current(C.CUcontext(c.ctx))); err != nil {
		return err
	}
	return f()
}

// SetCurrent makes c current on the calling OS thread (cuCtxSetCurrent). It
// only has a lasting effect if the caller has locked its goroutine to the
// thread with runtime.LockOSThread; the methods of Context do not need it.
func (c *Context) SetCurrent() error {
	if c.ctx == nil {
		return fmt.Errorf("cuda: context of device %d already released", c.dev.ordinal)
	}
	return check("cuCtxSetCurrent", C.cu_ctx_set_current(C.CUcontext(c.ctx)))
}

// Synchronize waits for all work in the context (cuCtxSynchronize).
func (c *Context) Synchronize() error {
	return c.do(func() error { return check("cuCtxSynchronize", C.cu_ctx_synchronize()) })
}

// MemAlloc allocates size bytes of device memory (cuMemAlloc_v2) and returns
// its device virtual address.
func (c *Context) MemAlloc(size uint64) (uint64, error) {
	var p C.CUdeviceptr
	err := c.do(func() error { return check("cuMemAlloc_v2", C.cu_mem_alloc(&p, C.size_t(size))) })
	return uint64(p), err
}

// MemFree frees device memory from MemAlloc (cuMemFree_v2).
func (c *Context) MemFree(dptr uint64) error {
	return c.do(func() error { return check("cuMemFree_v2", C.cu_mem_free(C.CUdeviceptr(dptr))) })
}

// ExportDMABUF exports size bytes of device memory at dptr as a dma-buf and
// returns its new file descriptor, which the caller closes
// (cuMemGetHandleForAddressRange with CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD).
// dptr and size must be multiples of the host page size. forcePCIe asks
// for CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE: BAR1 pages even where the
// GPU's memory is coherent with the CPU. Drivers before CUDA 11.7 lack the
// call; the error then matches [ErrNotSupported].
func (c *Context) ExportDMABUF(dptr, size uint64, forcePCIe bool) (int, error) {
	if C.cu_has_mem_get_handle() == 0 {
		return -1, fmt.Errorf("%w: cuMemGetHandleForAddressRange needs a CUDA 11.7 or later driver", ErrNotSupported)
	}
	var flags C.ulonglong
	if forcePCIe {
		flags = memRangeFlagDMABufMappingTypePCIe
	}
	fd := C.int(-1)
	err := c.do(func() error {
		return check("cuMemGetHandleForAddressRange",
			C.cu_mem_get_handle_dmabuf(&fd, C.CUdeviceptr(dptr), C.size_t(size), flags))
	})
	if err != nil {
		return -1, err
	}
	return int(fd), nil
}

// SetSyncMemops sets CU_POINTER_ATTRIBUTE_SYNC_MEMOPS on the allocation that
// holds dptr (cuPointerSetAttribute), so that synchronous copies and memsets
// on it are ordered with CPU accesses through a GDRCopy (BAR1) mapping.
func (c *Context) SetSyncMemops(dptr uint64) error {
	return c.do(func() error {
		return check("cuPointerSetAttribute", C.cu_pointer_set_flag(pointerAttrSyncMemops, C.CUdeviceptr(dptr)))
	})
}

// MemcpyHtoD copies src to device memory at dst (cuMemcpyHtoD_v2).
func (c *Context) MemcpyHtoD(dst uint64, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return c.do(func() error {
		return check("cuMemcpyHtoD_v2", C.cu_memcpy_htod(C.CUdeviceptr(dst), unsafe.Pointer(&src[0]), C.size_t(len(src))))
	})
}

// MemcpyDtoH copies len(dst) bytes of device memory at src to dst (cuMemcpyDtoH_v2).
func (c *Context) MemcpyDtoH(dst []byte, src uint64) error {
	if len(dst) == 0 {
		return nil
	}
	return c.do(func() error {
		return check("cuMemcpyDtoH_v2", C.cu_memcpy_dtoh(unsafe.Pointer(&dst[0]), C.CUdeviceptr(src), C.size_t(len(dst))))
	})
}

// MemsetD8 sets n bytes of device memory at dst to v (cuMemsetD8_v2).
func (c *Context) MemsetD8(dst uint64, v byte, n uint64) error {
	return c.do(func() error {
		return check("cuMemsetD8_v2", C.cu_memset_d8(C.CUdeviceptr(dst), C.uchar(v), C.size_t(n)))
	})
}

// HostAlloc allocates n bytes of page-locked host memory (cuMemHostAlloc),
// the memory cudaMemcpy is fastest from. The slice points to C memory: free it
// with [Context.HostFree], never let it outlive that call.
func (c *Context) HostAlloc(n int) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("cuda: cuMemHostAlloc: size %d", n)
	}
	var p unsafe.Pointer
	if err := c.do(func() error { return check("cuMemHostAlloc", C.cu_mem_host_alloc(&p, C.size_t(n))) }); err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// HostFree frees memory from HostAlloc (cuMemFreeHost).
func (c *Context) HostFree(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return c.do(func() error { return check("cuMemFreeHost", C.cu_mem_free_host(unsafe.Pointer(&b[0]))) })
}

// EnablePeerAccess lets c access memory of peer's context
// (cuCtxEnablePeerAccess). Enabling it twice is not an error.
func (c *Context) EnablePeerAccess(peer *Context) error {
	if peer.ctx == nil {
		return fmt.Errorf("cuda: context of device %d already released", peer.dev.ordinal)
	}
	return c.do(func() error {
		err := check("cuCtxEnablePeerAccess", C.cu_ctx_enable_peer_access(C.CUcontext(peer.ctx)))
		if e := (*Error)(nil); errors.As(err, &e) && e.Code == ErrorPeerAlreadyEnabled {
			return nil
		}
		return err
	})
}

// MemcpyPeer copies n bytes from src in srcCtx to dst in dstCtx
// (cuMemcpyPeer). It goes over NVLink or PCIe peer-to-peer when the contexts
// have peer access, and is staged through host memory by the driver otherwise.
// It runs with dstCtx current; call Synchronize before relying on the data.
func MemcpyPeer(dstCtx *Context, dst uint64, srcCtx *Context, src uint64, n uint64) error {
	if srcCtx.ctx == nil {
		return fmt.Errorf("cuda: context of device %d already released", srcCtx.dev.ordinal)
	}
	return dstCtx.do(func() error {
		return check("cuMemcpyPeer", C.cu_memcpy_peer(C.CUdeviceptr(dst), C.CUcontext(dstCtx.ctx),
			C.CUdeviceptr(src), C.CUcontext(srcCtx.ctx), C.size_t(n)))
	})
}

// BuiltIn says whether this build can reach the CUDA driver (cgo and Linux).
const BuiltIn = true
