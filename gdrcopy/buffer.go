package gdrcopy

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"syscall"

	"github.com/p2pkit/p2pkit/gdrcopy/internal/gdrdrv"
)

// Buffer is a pinned range of device memory, the equivalent of libgdrapi's
// gdr_mh_t. It is safe for concurrent use.
type Buffer struct {
	d      *Driver
	handle uint64 // gdrdrv handle; never reused by the driver within a descriptor
	addr   uint64
	size   uint64

	// dmabuf is the exported dma-buf of the DMA-BUF backend, nil for
	// gdrdrv; cleanup closes its descriptor if b is dropped unclosed.
	dmabuf  *dmabufPin
	cleanup runtime.Cleanup

	mu     sync.Mutex // guards closed and m; see Driver.mu for the lock order
	closed bool
	m      *Mapping
}

// Addr returns the device address the buffer was pinned at.
func (b *Buffer) Addr() uint64 { return b.addr }

// Size returns the size the buffer was pinned with, before rounding.
func (b *Buffer) Size() uint64 { return b.size }

// MappingType says how the CPU maps a buffer (gdrapi.h gdr_mapping_type_t,
// the same values as gdrdrv.h gdr_mr_type_t).
type MappingType uint32

// Possible MappingType values.
const (
	// MappingNone: not mapped.
	MappingNone MappingType = 0
	// MappingWC: write-combining (x86 and most arm64 BAR mappings). Stores
	// are buffered and may reach the GPU out of order until fenced; loads
	// are uncached and slow.
	MappingWC MappingType = 1
	// MappingCaching: cached, on platforms where the CPU can cache GPU
	// memory coherently (Grace Hopper, POWER9 with NVLink).
	MappingCaching MappingType = 2
	// MappingDevice: device memory, where no access may be unaligned
	// (BlueField-3).
	MappingDevice MappingType = 3
)

// String returns a short name of the mapping type.
func (t MappingType) String() string {
	switch t {
	case MappingNone:
		return "none"
	case MappingWC:
		return "write-combining"
	case MappingCaching:
		return "caching"
	case MappingDevice:
		return "device"
	}
	return fmt.Sprintf("MappingType(%d)", uint32(t))
}

// Info describes a pinned buffer as the driver sees it.
type Info struct {
	// VA is the start of the first pinned GPU page: the pinned address
	// rounded down to 64 KiB.
	VA uint64
	// MappedSize is the pinned length in whole GPU pages.
	MappedSize uint64
	// PageSize is the GPU page size, 65536.
	PageSize uint32
	// Mapping is how the buffer is mapped now; MappingNone if it is not.
	Mapping MappingType
}

// Info queries the driver about b with GET_INFO_V2 (gdrdrv 2.4 and later)
// or GET_INFO, deriving the mapping type from the older call's mapped and
// wc_mapping fields as gdrapi.c gdr_get_info_gdrdrv does.
func (b *Buffer) Info() (Info, error) {
	b.d.mu.RLock()
	defer b.d.mu.RUnlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return Info{}, closedError("info")
	}
	return b.info()
}

// info issues GET_INFO(_V2). The caller holds b.mu and keeps the driver
// open.
func (b *Buffer) info() (Info, error) {
	d := b.d
	if p := b.dmabuf; p != nil {
		// gdrapi.c gdr_get_info_dmabuf: the exported range in host pages.
		t := MappingNone
		if b.m != nil {
			t = p.typ
		}
		return Info{VA: p.start, MappedSize: p.length, PageSize: uint32(os.Getpagesize()), Mapping: t}, nil
	}
	if d.version >= versionGetInfoV2 {
		p := gdrdrv.GetInfoV2Params{Handle: b.handle}
		if err := d.dev.GetInfoV2(&p); err != nil {
			return Info{}, driverError("get info", err)
		}
		return Info{VA: p.VA, MappedSize: p.MappedSize, PageSize: p.PageSize, Mapping: MappingType(p.MappingType)}, nil
	}
	p := gdrdrv.GetInfoParams{Handle: b.handle}
	if err := d.dev.GetInfo(&p); err != nil {
		return Info{}, driverError("get info", err)
	}
	t := MappingNone
	switch {
	case p.Mapped != 0 && p.WCMapping != 0:
		t = MappingWC
	case p.Mapped != 0:
		t = MappingCaching
	}
	return Info{VA: p.VA, MappedSize: p.MappedSize, PageSize: p.PageSize, Mapping: t}, nil
}

// Invalidated asks the driver whether the NVIDIA free callback has run for
// b, that is whether its memory was freed while pinned (GET_CB_FLAG, gdrdrv.c
// gdrdrv_get_cb_flag; libgdrapi's gdr_get_callback_flag). It costs one
// ioctl. Only a driver in non-persistent mode ever reports true. Once it
// has, copies through b's mapping fail with [ErrInvalidated] without
// touching it.
func (b *Buffer) Invalidated() (bool, error) {
	b.d.mu.RLock()
	defer b.d.mu.RUnlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false, closedError("get callback flag")
	}
	return b.invalidated()
}

// invalidated issues GET_CB_FLAG. The caller holds b.mu and keeps the
// driver open.
func (b *Buffer) invalidated() (bool, error) {
	if b.dmabuf != nil {
		return false, nil // gdrapi.c gdr_get_callback_flag: always 0
	}
	p := gdrdrv.GetCBFlagParams{Handle: b.handle}
	if err := b.d.dev.GetCBFlag(&p); err != nil {
		return false, driverError("get callback flag", err)
	}
	if p.Flag == 0 {
		return false, nil
	}
	if b.m != nil {
		b.m.s.flags.Or(stateInvalid)
	}
	return true, nil
}

// Map maps b into the process and returns the mapping, as gdr_map does. A
// buffer has at most one mapping at a time (gdrdrv.c gdrdrv_mmap); after
// the mapping is closed, b may be mapped again.
//
// The buffer must have been pinned at a 64 KiB aligned address, or Map
// fails with [ErrUnaligned] (see the package documentation). libgdrapi
// leaves that check to the driver, whose mmap fails with EINVAL; Map makes
// it first, to say why. The mapping then starts at the pinned address and
// is [Buffer.Size] bytes long.
//
// The driver picks the mapping type: write-combining, or caching where the
// CPU can cache GPU memory, or device on BlueField-3. On gdrdrv 2.5 and
// later Map first sends REQ_MAPPING_TYPE with no preference, as gdr_map
// does, to clear any earlier request.
func (b *Buffer) Map() (*Mapping, error) {
	return b.MapAs(MappingNone)
}

// MapAs maps b like [Buffer.Map], but asks the driver for mapping type t,
// as gdr_map_v2 does with its GDR_MAP_FLAG_REQ_* flags; MappingNone lets
// the driver choose. Asking for a type needs gdrdrv 2.5 or later. The
// driver refuses a type the platform cannot give (gdrdrv.c
// gdrdrv_req_mapping_type: caching without cacheable GPU memory,
// write-combining where device mappings are mandatory, device anywhere
// else); such errors match [ErrNotSupported].
func (b *Buffer) MapAs(t MappingType) (*Mapping, error) {
	d := b.d
	op := fmt.Sprintf("map %#x+%d", b.addr, b.size)
	if t > MappingDevice {
		return nil, fmt.Errorf("gdrcopy: %s: unknown mapping type %d", op, uint32(t))
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, closedError(op)
	}
	if b.m != nil {
		return nil, fmt.Errorf("gdrcopy: %s: %w", op, errAlreadyMapped)
	}
	if b.dmabuf != nil {
		return b.mapDMABUF(op, t)
	}
	if off := b.addr & gdrdrv.GPUPageOffset; off != 0 {
		return nil, fmt.Errorf("%w: %s starts %d bytes into its GPU page, and gdrdrv maps only from a page start "+
			"because the rest of the page may belong to another allocation; allocate 64 KiB more and pin from %#x",
			ErrUnaligned, op, off, (b.addr+gdrdrv.GPUPageOffset)&gdrdrv.GPUPageMask)
	}
	if d.version >= versionReqMappingType {
		p := gdrdrv.ReqMappingTypeParams{Handle: b.handle, MappingType: uint32(t)}
		if err := d.dev.ReqMappingType(&p); err != nil {
			if errors.Is(err, syscall.EOPNOTSUPP) {
				return nil, fmt.Errorf("%w: %s: gdrdrv cannot map this platform's memory as %s: %w", ErrNotSupported, op, t, err)
			}
			return nil, driverError(op+": request mapping type", err)
		}
	} else if t != MappingNone {
		return nil, fmt.Errorf("%w: %s: requesting a mapping type needs gdrdrv %s or later, and this is %s",
			ErrNotSupported, op, versionReqMappingType, d.version)
	}
	// gdr_map_gdrdrv maps the size rounded up to the host page size.
	ps := uint64(os.Getpagesize())
	length := (b.size + ps - 1) &^ (ps - 1)
	if length > uint64(math.MaxInt) {
		return nil, fmt.Errorf("gdrcopy: %s: too large to map", op)
	}
	mem, err := d.dev.MmapHandle(b.handle, int(length))
	if err != nil {
		return nil, b.mmapError(op, err)
	}
	info, err := b.info()
	switch {
	case err != nil:
	case info.Mapping == MappingNone:
		err = fmt.Errorf("gdrcopy: %s: the driver reports the buffer unmapped after mmap", op)
	case t != MappingNone && info.Mapping != t:
		err = fmt.Errorf("gdrcopy: %s: asked for a %s mapping, the driver made a %s one", op, t, info.Mapping)
	}
	if err != nil {
		return nil, errors.Join(err, d.dev.Sys.Munmap(mem))
	}
	m := newMapping(b, info.Mapping, d.persistent, d.dev.Sys, mem, 0)
	b.m = m
	return m, nil
}

var errAlreadyMapped = errors.New("buffer is already mapped")

// mmapError explains a failed mmap of b. The caller holds b.mu.
func (b *Buffer) mmapError(op string, err error) error {
	if errors.Is(err, syscall.EINVAL) {
		// gdrdrv_mmap refuses an invalidated buffer with EINVAL.
		if inv, qerr := b.invalidated(); qerr == nil && inv {
			return fmt.Errorf("%w: %s: %w", ErrInvalidated, op, err)
		}
	}
	if errors.Is(err, syscall.EAGAIN) {
		return fmt.Errorf("gdrcopy: %s: %w; io_remap_pfn_range failed, which PAT on kernels 5.13 and later causes "+
			"for gdrdrv older than 2.5 (issues #44, #240)", op, err)
	}
	return driverError(op, err)
}

// Close unmaps b if it is mapped, waiting for copies in flight, then unpins
// it. It is idempotent. Like gdr_unpin_buffer, it forgets b even when the
// driver reports an error.
func (b *Buffer) Close() error {
	b.d.mu.RLock()
	defer b.d.mu.RUnlock()
	return b.close()
}

// close unmaps and unpins b. The caller keeps the driver open.
func (b *Buffer) close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	if b.dmabuf != nil {
		err := b.closeDMABUF()
		b.d.bufMu.Lock()
		delete(b.d.buffers, b)
		b.d.bufMu.Unlock()
		return err
	}
	var errs []error
	if b.m != nil {
		errs = append(errs, b.m.unmap())
		b.m = nil
	}
	p := gdrdrv.UnpinBufferParams{Handle: b.handle}
	if err := b.d.dev.UnpinBuffer(&p); err != nil {
		errs = append(errs, driverError(fmt.Sprintf("unpin %#x+%d", b.addr, b.size), err))
	}
	b.d.bufMu.Lock()
	delete(b.d.buffers, b)
	b.d.bufMu.Unlock()
	return errors.Join(errs...)
}
