package gdrdrv

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"
)

// Syscalls is the boundary between this package and the kernel: the
// system calls a gdrdrv client makes, shaped as the kernel sees them. [Host]
// issues them; a test installs a fake of the module here and nowhere else.
//
// Errors are the raw errno (a [syscall.Errno]) as the kernel returned it, so
// that callers can classify them; callers must wrap them before handing them
// to their own users.
type Syscalls interface {
	// Open opens path with O_RDWR|O_CLOEXEC, as gdrapi.c
	// gdr_open_gdrdrv_internal does.
	Open(path string) (fd int, err error)
	// Close closes fd. gdrdrv.c gdrdrv_release unpins everything still
	// pinned through it once the last reference to the file goes away.
	Close(fd int) error
	// Ioctl issues ioctl(fd, req, arg). arg points at a structure of the
	// full size the command copies; it must stay alive for the call.
	Ioctl(fd int, req uint32, arg unsafe.Pointer) error
	// Mmap maps length bytes of fd at offset with PROT_READ|PROT_WRITE and
	// MAP_SHARED, as gdrapi.c gdr_map_gdrdrv does.
	Mmap(fd int, offset int64, length int) ([]byte, error)
	// Munmap unmaps a region returned by Mmap, or one that Reserve
	// replaced.
	Munmap(b []byte) error
	// Reserve replaces the region b returned by Mmap with an inaccessible
	// anonymous mapping of the same addresses (mmap MAP_FIXED, PROT_NONE,
	// MAP_NORESERVE), which unmaps b as munmap would but keeps the
	// addresses from being reused: any access faults. Munmap releases it.
	Reserve(b []byte) error
}

// Dev is a descriptor of the gdrdrv character device together with the
// boundary that reaches it. It does not own the descriptor.
type Dev struct {
	Sys Syscalls
	FD  int
}

func (d Dev) ioctl(req uint32, arg unsafe.Pointer) error {
	return d.Sys.Ioctl(d.FD, req, arg)
}

// PinBuffer issues GDRDRV_IOC_PIN_BUFFER (gdrdrv.c gdrdrv_pin_buffer).
func (d Dev) PinBuffer(p *PinBufferParams) error {
	err := d.ioctl(IocPinBuffer, unsafe.Pointer(p))
	runtime.KeepAlive(p)
	return err
}

// PinBufferV2 issues GDRDRV_IOC_PIN_BUFFER_V2 (gdrdrv.c
// gdrdrv_pin_buffer_v2). Requires gdrdrv >= 2.5.
func (d Dev) PinBufferV2(p *PinBufferV2Params) error {
	err := d.ioctl(IocPinBufferV2, unsafe.Pointer(p))
	runtime.KeepAlive(p)
	return err
}

// UnpinBuffer issues GDRDRV_IOC_UNPIN_BUFFER (gdrdrv.c gdrdrv_unpin_buffer).
func (d Dev) UnpinBuffer(p *UnpinBufferParams) error {
	err := d.ioctl(IocUnpinBuffer, unsafe.Pointer(p))
	runtime.KeepAlive(p)
	return err
}

// GetCBFlag issues GDRDRV_IOC_GET_CB_FLAG (gdrdrv.c gdrdrv_get_cb_flag).
func (d Dev) GetCBFlag(p *GetCBFlagParams) error {
	err := d.ioctl(IocGetCBFlag, unsafe.Pointer(p))
	runtime.KeepAlive(p)
	return err
}

// GetInfo issues GDRDRV_IOC_GET_INFO (gdrdrv.c gdrdrv_get_info).
func (d Dev) GetInfo(p *GetInfoParams) error {
	err := d.ioctl(IocGetInfo, unsafe.Pointer(p))
	runtime.KeepAlive(p)
	return err
}

// GetInfoV2 issues GDRDRV_IOC_GET_INFO_V2 (gdrdrv.c gdrdrv_get_info_v2).
// Requires gdrdrv >= 2.4.
func (d Dev) GetInfoV2(p *GetInfoV2Params) error {
	err := d.ioctl(IocGetInfoV2, unsafe.Pointer(p))
	runtime.KeepAlive(p)
	return err
}

// GetAttr issues GDRDRV_IOC_GET_ATTR (gdrdrv.c gdrdrv_get_attr). Requires
// gdrdrv >= 2.5.
func (d Dev) GetAttr(p *GetAttrParams) error {
	err := d.ioctl(IocGetAttr, unsafe.Pointer(p))
	runtime.KeepAlive(p)
	return err
}

// ReqMappingType issues GDRDRV_IOC_REQ_MAPPING_TYPE (gdrdrv.c
// gdrdrv_req_mapping_type). Requires gdrdrv >= 2.5.
func (d Dev) ReqMappingType(p *ReqMappingTypeParams) error {
	err := d.ioctl(IocReqMappingType, unsafe.Pointer(p))
	runtime.KeepAlive(p)
	return err
}

// GetVersion issues GDRDRV_IOC_GET_VERSION (gdrdrv.c gdrdrv_get_version).
func (d Dev) GetVersion(p *GetVersionParams) error {
	err := d.ioctl(IocGetVersion, unsafe.Pointer(p))
	runtime.KeepAlive(p)
	return err
}

// MmapHandle maps length bytes of the region pinned under handle. gdrdrv.c
// gdrdrv_mmap reads the handle from vm_pgoff, so the file offset is
// handle << PAGE_SHIFT of the host page size (gdrapi.c gdr_map_gdrdrv
// computes the shift from sysconf(_SC_PAGESIZE)).
func (d Dev) MmapHandle(handle uint64, length int) ([]byte, error) {
	off, err := HandleOffset(handle, os.Getpagesize())
	if err != nil {
		return nil, err
	}
	return d.Sys.Mmap(d.FD, off, length)
}

// HandleOffset returns the mmap file offset of handle for host pages of
// pageSize bytes, or an error if it does not fit in an off_t.
func HandleOffset(handle uint64, pageSize int) (int64, error) {
	shift := PageShift(pageSize)
	if handle > (1<<63-1)>>shift {
		return 0, fmt.Errorf("gdrdrv: handle %#x overflows the mmap offset", handle)
	}
	return int64(handle << shift), nil
}

// PageShift returns log2(pageSize) for a power-of-two page size.
func PageShift(pageSize int) uint {
	var shift uint
	for 1<<shift < pageSize {
		shift++
	}
	return shift
}
