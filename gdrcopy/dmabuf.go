package gdrcopy

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"syscall"

	"github.com/p2pkit/p2pkit/gdrcopy/internal/gdrdrv"
)

// Exporter exports device memory as a dma-buf, the job
// cuMemGetHandleForAddressRange does for libgdrapi's DMA-BUF backend
// (gdrapi.c gdr_pin_buffer_dmabuf). This package needs no CUDA; the caller
// supplies the export, typically through its own CUDA binding.
type Exporter interface {
	// ExportDMABUF exports size bytes of device memory at ptr, both
	// multiples of the host page size, with
	// CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, adding
	// CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE when forcePCIe is set. The
	// Buffer owns the returned descriptor and closes it.
	ExportDMABUF(ptr, size uint64, forcePCIe bool) (DMABUF, error)
}

// DMABUF is an exported dma-buf.
type DMABUF struct {
	// FD is the dma-buf's file descriptor.
	FD int
	// Coherent reports that the GPU's memory is coherent with the CPU
	// (CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, as
	// cuda_wrapper.c gdr_cuda_device_is_coherent reads it). Such memory is
	// mapped caching unless the pin forced PCIe; anything else is mapped
	// write-combining (gdrapi.c gdr_pin_buffer_dmabuf).
	Coherent bool
}

// Options choose how [OpenOptions] reaches GPU memory.
type Options struct {
	// Path is the gdrdrv device node; DefaultPath if empty.
	Path string
	// DMABUF, if set, enables the DMA-BUF backend: when gdrdrv is absent
	// (the error matches ErrDriverNotLoaded), or always with ForceDMABUF.
	DMABUF Exporter
	// ForceDMABUF skips gdrdrv and uses the DMA-BUF backend, as
	// GDRCOPY_USE_DMABUF_MMAP=1 makes libgdrapi do. This package reads no
	// environment: a program that honours the variable sets this field.
	ForceDMABUF bool
}

// OpenOptions opens a Driver, trying its backends in libgdrapi's order
// (gdrapi.c gdr_open): gdrdrv at o.Path first, as [OpenPath] does; then,
// if gdrdrv is absent and o.DMABUF is set, the DMA-BUF backend. With
// o.ForceDMABUF it goes straight to the DMA-BUF backend.
//
// The DMA-BUF backend needs no kernel module of its own: [Driver.Pin]
// exports the range through o.DMABUF and [Buffer.Map] maps the dma-buf's
// descriptor. The NVIDIA driver must support CPU mappings of its dma-bufs,
// which libgdrapi 2.6 expects from CUDA 13.3 drivers on (cuda_wrapper.c
// checks cuDriverGetVersion >= 13030); an older driver exports but refuses
// the mapping, and Map says so. Pins work in host pages, not 64 KiB GPU
// pages: the range is rounded out to whole host pages for the export (which
// the exporter refuses if the rounded range leaves the allocation), and the
// mapping starts at the pinned address, so no 64 KiB alignment is needed.
// Mappings never invalidate (they are persistent), and [Driver.Version] is
// 0.
func OpenOptions(o Options) (*Driver, error) {
	if o.Path == "" {
		o.Path = DefaultPath
	}
	sys, err := hostSyscalls()
	if err != nil {
		return nil, err
	}
	return openOptions(sys, o)
}

// openOptions is OpenOptions over any syscall boundary.
func openOptions(sys gdrdrv.Syscalls, o Options) (*Driver, error) {
	if o.ForceDMABUF && o.DMABUF == nil {
		return nil, errors.New("gdrcopy: open: ForceDMABUF needs an Exporter in Options.DMABUF")
	}
	if !o.ForceDMABUF {
		d, err := open(sys, o.Path)
		if err == nil || o.DMABUF == nil || !errors.Is(err, ErrDriverNotLoaded) {
			return d, err
		}
	}
	return &Driver{
		dev:        gdrdrv.Dev{Sys: sys, FD: -1},
		path:       "dma-buf",
		exp:        o.DMABUF,
		persistent: true,
		buffers:    make(map[*Buffer]struct{}),
	}, nil
}

// pinDMABUF is Pin for the DMA-BUF backend: the range is rounded out to
// host pages and exported, as gdrapi.c gdr_pin_buffer_dmabuf does. The
// caller holds d.mu shared.
func (d *Driver) pinDMABUF(op string, devPtr, size uint64, flags PinFlags) (*Buffer, error) {
	ps := uint64(os.Getpagesize())
	start := devPtr &^ (ps - 1)
	length := (devPtr+size+ps-1)&^(ps-1) - start // Pin checked that it does not overflow
	buf, err := d.exp.ExportDMABUF(start, length, flags&PinForcePCIe != 0)
	if err != nil {
		return nil, fmt.Errorf("gdrcopy: %s: export as dma-buf: %w", op, err)
	}
	typ := MappingWC
	if buf.Coherent && flags&PinForcePCIe == 0 {
		typ = MappingCaching
	}
	b := &Buffer{d: d, addr: devPtr, size: size, dmabuf: &dmabufPin{fd: buf.FD, start: start, length: length, typ: typ}}
	// A safety net for a Buffer dropped without Close: the descriptor. A
	// mapping holds its own reference to the dma-buf.
	sys := d.dev.Sys
	b.cleanup = runtime.AddCleanup(b, func(fd int) { _ = sys.Close(fd) }, buf.FD)
	return b, nil
}

// dmabufPin is the state of a Buffer of the DMA-BUF backend.
type dmabufPin struct {
	fd            int
	start, length uint64 // the exported range, in whole host pages
	typ           MappingType
}

// mapDMABUF is MapAs for the DMA-BUF backend (gdrapi.c gdr_map_dmabuf). The
// caller holds b.mu.
func (b *Buffer) mapDMABUF(op string, t MappingType) (*Mapping, error) {
	p := b.dmabuf
	if t != MappingNone && t != p.typ {
		return nil, fmt.Errorf("%w: %s: a dma-buf of this memory maps only as %s, not %s", ErrNotSupported, op, p.typ, t)
	}
	if p.length > math.MaxInt {
		return nil, fmt.Errorf("gdrcopy: %s: too large to map", op)
	}
	mem, err := b.d.dev.Sys.Mmap(p.fd, 0, int(p.length))
	if err != nil {
		return nil, dmabufMmapError(op, err)
	}
	m := newMapping(b, p.typ, true, b.d.dev.Sys, mem, int(b.addr-p.start))
	b.m = m
	return m, nil
}

// errnoENOTSUPP is the kernel-internal ENOTSUPP (include/linux/errno.h),
// which reaches user space from a dma-buf exporter that has no mmap.
const errnoENOTSUPP = syscall.Errno(524)

// dmabufMmapError explains a failed mmap of a dma-buf.
func dmabufMmapError(op string, err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) && (errno == errnoENOTSUPP || errno == syscall.EOPNOTSUPP || errno == syscall.ENODEV) {
		return fmt.Errorf("%w: %s: the NVIDIA driver exported the memory as a dma-buf but cannot map it into the CPU "+
			"(mmap: %w): CPU mappings of GPU dma-bufs need an NVIDIA driver for CUDA 13.3 or later "+
			"(cuDriverGetVersion 13030, the minimum libgdrapi's DMA-BUF backend accepts); "+
			"with an older driver, load gdrdrv instead", ErrNotSupported, op, err)
	}
	return fmt.Errorf("gdrcopy: %s: mmap of the dma-buf: %w", op, err)
}

// closeDMABUF releases a DMA-BUF Buffer: its mapping, then its descriptor
// (gdrapi.c gdr_unpin_buffer). The caller holds b.mu.
func (b *Buffer) closeDMABUF() error {
	b.cleanup.Stop()
	var errs []error
	if b.m != nil {
		errs = append(errs, b.m.unmap())
		b.m = nil
	}
	if err := b.d.dev.Sys.Close(b.dmabuf.fd); err != nil {
		errs = append(errs, fmt.Errorf("gdrcopy: close the dma-buf of %#x+%d: %w", b.addr, b.size, err))
	}
	return errors.Join(errs...)
}
