package gdrcopy

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"syscall"

	"github.com/p2pkit/p2pkit/gdrcopy/internal/gdrdrv"
)

// DefaultPath is the device node of gdrdrv.
const DefaultPath = "/dev/gdrdrv"

// Driver is an open descriptor of the gdrdrv device, the equivalent of
// libgdrapi's gdr_t. It is safe for concurrent use.
type Driver struct {
	dev     gdrdrv.Dev
	path    string
	version Version
	// persistent records that the driver pins with the NVIDIA persistent
	// API and so never tears down a live mapping: a fault on one is then
	// ErrFault, not ErrInvalidated. Known only from gdrdrv 2.5 on
	// (GET_ATTR); always true for the DMA-BUF backend.
	persistent bool
	// exp is the exporter of the DMA-BUF backend; nil for gdrdrv, whose
	// descriptor is dev.FD.
	exp Exporter

	// mu guards the descriptor: operations that use it hold mu shared,
	// Close holds it exclusively. Lock order: Driver.mu, Buffer.mu,
	// Mapping.mu, Driver.bufMu.
	mu      sync.RWMutex
	closed  bool
	cleanup runtime.Cleanup

	bufMu   sync.Mutex
	buffers map[*Buffer]struct{}
}

// Open opens /dev/gdrdrv. See [OpenPath].
func Open() (*Driver, error) {
	return OpenPath(DefaultPath)
}

// OpenPath opens the gdrdrv device node at path (O_RDWR|O_CLOEXEC) and
// checks its version as gdrapi.c gdr_open_gdrdrv_internal does: the driver
// must be 2.0 or later, and must not require a newer client than
// [APIVersion].
//
// A missing node or module gives an error matching [ErrDriverNotLoaded] that
// says how to load it and make the node; a node the caller may not open
// gives one matching [io/fs.ErrPermission].
func OpenPath(path string) (*Driver, error) {
	sys, err := hostSyscalls()
	if err != nil {
		return nil, err
	}
	return open(sys, path)
}

// open is OpenPath over any syscall boundary.
func open(sys gdrdrv.Syscalls, path string) (*Driver, error) {
	fd, err := sys.Open(path)
	if err != nil {
		return nil, openError(path, err)
	}
	dev := gdrdrv.Dev{Sys: sys, FD: fd}
	var p gdrdrv.GetVersionParams
	if err := dev.GetVersion(&p); err != nil {
		_ = sys.Close(fd)
		return nil, versionError(path, err)
	}
	v := Version(p.DriverVersion)
	if err := checkVersions(v, Version(p.MinimumAPIVersion)); err != nil {
		_ = sys.Close(fd)
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	d := &Driver{
		dev:     dev,
		path:    path,
		version: v,
		buffers: make(map[*Buffer]struct{}),
	}
	if v >= versionGetAttr {
		p := gdrdrv.GetAttrParams{Attr: gdrdrv.AttrUsePersistentMapping}
		if err := dev.GetAttr(&p); err != nil {
			_ = sys.Close(fd)
			return nil, driverError(path+": get attribute", err)
		}
		d.persistent = p.Val != 0
	}
	// A safety net for a Driver dropped without Close; it cannot run while
	// any Buffer or Mapping is reachable, since they reference the Driver.
	d.cleanup = runtime.AddCleanup(d, func(dev gdrdrv.Dev) { _ = dev.Sys.Close(dev.FD) }, dev)
	return d, nil
}

// Version returns the version of the loaded gdrdrv module; 0 for the
// DMA-BUF backend.
func (d *Driver) Version() Version {
	return d.version
}

// Attributes describes how the loaded gdrdrv was built and configured.
type Attributes struct {
	// PersistentMapping reports that pins use the NVIDIA persistent API:
	// freeing the memory does not invalidate them
	// (GDRDRV_ATTR_USE_PERSISTENT_MAPPING, the use_persistent_mapping
	// module parameter, default on since 2.5).
	PersistentMapping bool
	// ForcePCIe reports that pins may carry [PinForcePCIe]
	// (GDRDRV_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE).
	ForcePCIe bool
	// DMABUF reports that the driver maps dma-bufs instead of using
	// gdrdrv (see [OpenOptions]; libgdrapi's GDR_ATTR_USING_DMA_BUF_MMAP).
	DMABUF bool
}

// Attributes queries the driver's attributes with GET_ATTR. A driver older
// than 2.5 has no GET_ATTR; both attributes then read false, as
// libgdrapi's gdr_get_attribute reports them.
func (d *Driver) Attributes() (Attributes, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return Attributes{}, closedError("attributes")
	}
	var a Attributes
	if d.exp != nil {
		// gdrapi.c gdr_get_attribute answers 1 to all three for dma-buf.
		return Attributes{PersistentMapping: true, ForcePCIe: true, DMABUF: true}, nil
	}
	if d.version < versionGetAttr {
		return a, nil
	}
	for _, q := range []struct {
		attr uint32
		dst  *bool
	}{
		{gdrdrv.AttrUsePersistentMapping, &a.PersistentMapping},
		{gdrdrv.AttrSupportPinFlagForcePCIe, &a.ForcePCIe},
	} {
		p := gdrdrv.GetAttrParams{Attr: q.attr}
		if err := d.dev.GetAttr(&p); err != nil {
			return Attributes{}, driverError(fmt.Sprintf("get attribute %d", q.attr), err)
		}
		*q.dst = p.Val != 0
	}
	return a, nil
}

// PinFlags modify a pin (gdrapi.h GDR_PIN_FLAG_*).
type PinFlags uint32

// Possible PinFlags values.
const (
	// PinDefault pins with the driver's defaults.
	PinDefault PinFlags = 0
	// PinForcePCIe forces a BAR1 (PCIe) mapping on coherent platforms such
	// as Grace Hopper. It needs gdrdrv 2.5 or later in persistent mode, built
	// against an NVIDIA driver that has the flag (see [Attributes]).
	PinForcePCIe PinFlags = 1
)

// Pin pins size bytes of device memory at devPtr, as gdr_pin_buffer_v2
// does, and returns the pinned buffer.
//
// The range is rounded out to whole 64 KiB GPU pages: the address is passed
// unchanged (so the driver still knows where in its first page the buffer
// starts) and the length is extended to end on a GPU page boundary. gdrdrv
// 2.4.2 and later round the same way themselves (gdrdrv.c
// __gdrdrv_pin_buffer); older ones passed unaligned lengths to the NVIDIA
// driver, which 555 and later reject (issues #299, #305).
//
// Drivers from 2.5 get PIN_BUFFER_V2; older ones get PIN_BUFFER with no P2P
// tokens, which cannot carry flags. EINVAL from the driver usually means the
// memory is not a CUDA allocation of this process, the GPU lacks GPUDirect
// RDMA, or the flag is unsupported; ENOMEM means BAR1 space ran out.
func (d *Driver) Pin(devPtr, size uint64, flags PinFlags) (*Buffer, error) {
	op := fmt.Sprintf("pin %#x+%d", devPtr, size)
	if flags&^PinForcePCIe != 0 {
		return nil, fmt.Errorf("gdrcopy: %s: unknown flags %#x", op, uint32(flags))
	}
	if size == 0 {
		return nil, fmt.Errorf("gdrcopy: %s: empty range", op)
	}
	end := devPtr + size
	if end < devPtr || end > ^gdrdrv.GPUPageOffset {
		return nil, fmt.Errorf("gdrcopy: %s: range overflows the address space", op)
	}
	length := (end+gdrdrv.GPUPageOffset)&gdrdrv.GPUPageMask - devPtr

	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return nil, closedError(op)
	}
	if d.exp != nil {
		b, err := d.pinDMABUF(op, devPtr, size, flags)
		if err != nil {
			return nil, err
		}
		d.addBuffer(b)
		return b, nil
	}
	var handle uint64
	if d.version >= versionPinBufferV2 {
		p := gdrdrv.PinBufferV2Params{Addr: devPtr, Size: length, Flags: uint32(flags)}
		if err := d.dev.PinBufferV2(&p); err != nil {
			return nil, pinError(op, err)
		}
		handle = p.Handle
	} else {
		if flags != PinDefault {
			return nil, fmt.Errorf("%w: %s: pin flags need gdrdrv %s or later, and this is %s",
				ErrNotSupported, op, versionPinBufferV2, d.version)
		}
		p := gdrdrv.PinBufferParams{Addr: devPtr, Size: length}
		if err := d.dev.PinBuffer(&p); err != nil {
			return nil, pinError(op, err)
		}
		handle = p.Handle
	}
	b := &Buffer{d: d, handle: handle, addr: devPtr, size: size}
	d.addBuffer(b)
	return b, nil
}

// addBuffer records b as open through d.
func (d *Driver) addBuffer(b *Buffer) {
	d.bufMu.Lock()
	d.buffers[b] = struct{}{}
	d.bufMu.Unlock()
}

// pinError explains the errnos a pin commonly fails with; the NVIDIA
// driver's own errors pass through gdrdrv.c __gdrdrv_pin_buffer unchanged.
func pinError(op string, err error) error {
	switch {
	case errors.Is(err, syscall.EINVAL):
		return fmt.Errorf("gdrcopy: %s: %w; the NVIDIA driver refused the range: not a cuMemAlloc/cudaMalloc "+
			"allocation of this process, managed memory, a GPU without GPUDirect RDMA (GeForce), "+
			"or a flag this driver lacks", op, err)
	case errors.Is(err, syscall.ENOMEM):
		return fmt.Errorf("gdrcopy: %s: %w; BAR1 space is exhausted (nvidia-smi -q -d MEMORY shows BAR1 usage), "+
			"or this descriptor ran out of handles", op, err)
	default:
		return driverError(op, err)
	}
}

// Close unmaps and unpins every buffer still open through d, then closes
// the descriptor. It waits for copies in flight. Close is idempotent; it
// releases everything even when a step fails, and returns the errors joined.
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	d.cleanup.Stop()
	d.bufMu.Lock()
	buffers := make([]*Buffer, 0, len(d.buffers))
	for b := range d.buffers {
		buffers = append(buffers, b)
	}
	d.bufMu.Unlock()
	var errs []error
	for _, b := range buffers {
		errs = append(errs, b.close())
	}
	if d.exp == nil {
		if err := d.dev.Sys.Close(d.dev.FD); err != nil {
			errs = append(errs, fmt.Errorf("gdrcopy: close %s: %w", d.path, err))
		}
	}
	return errors.Join(errs...)
}
