//go:build linux

package fakegdrdrv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/p2pkit/p2pkit/gdrcopy/internal/gdrdrv"
)

// DefaultPath is the device node the module answers to unless
// [Config.Path] says otherwise.
const DefaultPath = "/dev/gdrdrv"

// gpuBase is the first fake GPU virtual address; it is 2 MiB aligned like
// the start of a CUDA allocation pool.
const gpuBase uint64 = 0x7f00_0000_0000

// allocAlign is the alignment of cuMemAlloc sub-allocations: small
// allocations share 64 KiB GPU pages, as gdrcopy_sanity's
// basic_unaligned_mapping and basic_small_buffers_mapping rely on.
const allocAlign = 512

// Config describes the simulated module, its parameters and the platform.
// The zero value is a gdrdrv 2.6 with non-persistent mappings on an x86
// host (write-combining mappings).
type Config struct {
	// Path is the device node; DefaultPath if empty. Opening anything else
	// fails with ENOENT.
	Path string
	// OpenErr, if set, is the errno open(2) of the node returns: ENOENT
	// when no node exists, EACCES when its mode denies the caller, ENXIO
	// when its major has no driver (module not loaded, stale node).
	OpenErr unix.Errno
	// OtherDriver makes the node belong to another driver that answers
	// EINVAL to every gdrdrv ioctl (issue #115: a stale node whose major was
	// taken by a DRM driver).
	OtherDriver bool

	// Version is the GDRDRV_VERSION word the module reports; 0 means
	// gdrdrv.DriverVersion. Commands newer than it answer ENOTTY, and a
	// version below 2.0 has no GET_VERSION at all.
	Version uint32
	// MinimumAPIVersion is the MINIMUM_GDR_API_VERSION the module reports;
	// 0 means gdrdrv.MinimumAPIVersion.
	MinimumAPIVersion uint32

	// Persistent is the effective use_persistent_mapping parameter
	// (gdrdrv.c gdr_use_persistent_mapping): pins use
	// nvidia_p2p_get_pages_persistent and are never invalidated.
	Persistent bool
	// ForcePCIe says the module was built with
	// NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING (gdrdrv.c gdr_support_force_pcie).
	ForcePCIe bool
	// Cacheable says the platform can cache GPU memory and the pages are
	// cacheable (Grace, POWER9): gdrdrv.c gdr_mr_supports_cache_mapping.
	Cacheable bool
	// DeviceMapping says device mappings are mandatory (a BlueField-3 root
	// port: gdrdrv_cpu_must_use_device_mapping).
	DeviceMapping bool
	// BAR1Size, if non-zero, is how many bytes the NVIDIA driver can pin at
	// once; beyond it a pin fails with ENOMEM (issue #301).
	BAR1Size uint64
	// RemapFails makes io_remap_pfn_range fail, so mmap answers EAGAIN
	// (issues #44, #240).
	RemapFails bool
	// DMABUFMmapErr, if set, is the errno a CPU mmap of an exported
	// dma-buf fails with: ENOTSUPP (524) from an NVIDIA driver older than
	// CUDA 13.3, whose exporter has no mmap.
	DMABUFMmapErr unix.Errno
	// FirstHandle is the next_handle of every newly opened file. gdrdrv
	// starts at 0; tests set it near the top to exercise handle exhaustion.
	FirstHandle uint64
}

// Module is a simulated gdrdrv module plus the GPU memory behind it. It
// implements [gdrdrv.Syscalls]. It is safe for concurrent use.
type Module struct {
	cfg       Config
	pageSize  int
	pageShift uint

	mu     sync.Mutex
	tgid   int
	gpu    int // memfd backing GPU memory at offset va-gpuBase
	zapFD  int // empty memfd: mapping it over a range makes access SIGBUS
	nextVA uint64
	allocs map[uint64]uint64 // live allocations: address -> size
	files  map[int]*file     // open descriptors
	live   map[*file]bool    // files not yet released (open, or mapped)
	vmas   map[uintptr]*vma  // live mappings by start address
	pinned uint64            // bytes pinned through the NVIDIA driver

	dmabufs    map[int]dmabuf // exported dma-bufs by descriptor
	dmabufMaps map[uintptr]bool
}

// dmabuf is an exported range of GPU memory.
type dmabuf struct {
	va, size uint64
}

// file is gdrdrv.c struct gdr_info: the state of one open of the node.
type file struct {
	owner      int
	mrs        []*mr // mr_list: list_add inserts at the head
	nextHandle uint64
	overflow   bool
	closed     bool
	vmas       int
}

// mr is gdrdrv.c gdr_mr_t.
type mr struct {
	handle     uint64
	va         uint64
	mappedSize uint64
	offset     uint64
	pageTable  bool // NVIDIA page table held
	cbFlag     bool
	forcePCIe  bool
	mapType    uint32 // cpu_mapping_type
	reqType    uint32 // req_mapping_type
	vma        *vma
}

type vma struct {
	f     *file
	pgoff uint64
	b     []byte
}

// New returns a module configured by cfg, or an error if the memfds that
// back it cannot be created. Close releases them.
func New(cfg Config) (*Module, error) {
	if cfg.Path == "" {
		cfg.Path = DefaultPath
	}
	if cfg.Version == 0 {
		cfg.Version = gdrdrv.DriverVersion
	}
	if cfg.MinimumAPIVersion == 0 {
		cfg.MinimumAPIVersion = gdrdrv.MinimumAPIVersion
	}
	gpu, err := unix.MemfdCreate("fakegdrdrv-gpu", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("fakegdrdrv: memfd: %w", err)
	}
	zap, err := unix.MemfdCreate("fakegdrdrv-zapped", unix.MFD_CLOEXEC)
	if err != nil {
		unix.Close(gpu)
		return nil, fmt.Errorf("fakegdrdrv: memfd: %w", err)
	}
	ps := os.Getpagesize()
	return &Module{
		cfg:       cfg,
		pageSize:  ps,
		pageShift: gdrdrv.PageShift(ps),
		tgid:      os.Getpid(),
		gpu:       gpu,
		zapFD:     zap,
		nextVA:    gpuBase,
		allocs:    make(map[uint64]uint64),
		files:     make(map[int]*file),
		live:      make(map[*file]bool),
		vmas:      make(map[uintptr]*vma),

		dmabufs:    make(map[int]dmabuf),
		dmabufMaps: make(map[uintptr]bool),
	}, nil
}

// Unload releases the memfds backing the module, as rmmod would end it. Mappings made through it
// stay valid until unmapped.
func (m *Module) Unload() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gpu < 0 {
		return nil
	}
	err := errors.Join(unix.Close(m.gpu), unix.Close(m.zapFD))
	m.gpu, m.zapFD = -1, -1
	return err
}

// SetProcess makes later calls come from thread group tgid, as a forked
// child or a receiver of the descriptor over SCM_RIGHTS would. Opens record
// the caller's thread group as the owner (gdrdrv.c gdrdrv_open).
func (m *Module) SetProcess(tgid int) {
	m.mu.Lock()
	m.tgid = tgid
	m.mu.Unlock()
}

// Stats counts what the module still holds.
type Stats struct {
	Files   int // files not yet released
	Pinned  int // regions still on some file's mr_list
	Mapped  int // live mappings, of gdrdrv or of dma-bufs
	DMABUFs int // exported dma-buf descriptors still open
}

// Stats reports what the module still holds.
func (m *Module) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := Stats{Files: len(m.live), Mapped: len(m.vmas) + len(m.dmabufMaps), DMABUFs: len(m.dmabufs)}
	for f := range m.live {
		s.Pinned += len(f.mrs)
	}
	return s
}

// Alloc simulates cuMemAlloc: it returns a fresh GPU virtual address of
// size bytes, aligned to 512 bytes, so that small allocations share a GPU
// page. Addresses are never reused.
func (m *Module) Alloc(size uint64) (uint64, error) {
	if size == 0 {
		return 0, errors.New("fakegdrdrv: alloc of 0 bytes")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ptr := roundUp(m.nextVA, allocAlign)
	end := ptr + size
	if end < ptr || end-gpuBase > math.MaxInt64/2 {
		return 0, errors.New("fakegdrdrv: out of GPU address space")
	}
	if err := unix.Ftruncate(m.gpu, int64(roundUp(end-gpuBase, gdrdrv.GPUPageSize))); err != nil {
		return 0, fmt.Errorf("fakegdrdrv: grow GPU memory: %w", err)
	}
	m.nextVA = end
	m.allocs[ptr] = size
	return ptr, nil
}

// Free simulates cuMemFree. In non-persistent mode the NVIDIA driver runs
// gdrdrv.c gdrdrv_get_pages_free_callback for every pin that overlaps the
// allocation: it sets the callback flag, drops the page table and zaps the
// mapping, so later access raises SIGBUS. In persistent mode pins are left
// alone and keep the old data readable.
func (m *Module) Free(ptr uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	size, ok := m.allocs[ptr]
	if !ok {
		return fmt.Errorf("fakegdrdrv: free of %#x: not allocated", ptr)
	}
	delete(m.allocs, ptr)
	if m.cfg.Persistent {
		return nil
	}
	var errs []error
	for f := range m.live {
		for _, r := range f.mrs {
			if !r.pageTable || r.va >= ptr+size || ptr >= r.va+r.mappedSize {
				continue
			}
			r.cbFlag = true
			r.pageTable = false
			m.pinned -= r.mappedSize
			if r.mapType != gdrdrv.MRNone {
				errs = append(errs, m.destroyMappings(r))
			}
		}
	}
	return errors.Join(errs...)
}

// Zap makes every mapping of the pins that cover ptr inaccessible behind
// the driver's back (mprotect PROT_NONE), as a GPU reset or a driver fault
// might: any access then faults with SIGSEGV. Unlike Free in
// non-persistent mode it leaves the callback flag clear and the pin intact.
func (m *Module) Zap(ptr uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for f := range m.live {
		for _, r := range f.mrs {
			if v := r.vma; v != nil && r.mapType != gdrdrv.MRNone && ptr >= r.va && ptr-r.va < r.mappedSize {
				if err := unix.Mprotect(v.b, unix.PROT_NONE); err != nil {
					errs = append(errs, fmt.Errorf("fakegdrdrv: zap mapping: %w", err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// ExportDMABUF simulates cuMemGetHandleForAddressRange with
// CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD: it returns a new descriptor of a
// dma-buf of size bytes at ptr, which must be host-page aligned and lie in
// one allocation (CUDA_ERROR_INVALID_VALUE, here EINVAL, otherwise). The
// descriptor is a real one; Close closes it, and Mmap maps it.
func (m *Module) ExportDMABUF(ptr, size uint64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := uint64(m.pageSize)
	if size == 0 || ptr%ps != 0 || size%ps != 0 || size > math.MaxInt32 {
		return -1, unix.EINVAL
	}
	if m.checkAllocated(ptr, int(size)) != nil {
		return -1, unix.EINVAL
	}
	fd, err := unix.MemfdCreate("fakegdrdrv-dmabuf", unix.MFD_CLOEXEC)
	if err != nil {
		return -1, err
	}
	m.dmabufs[fd] = dmabuf{va: ptr, size: size}
	return fd, nil
}

// ReadDevice simulates cuMemcpyDtoH of len(p) bytes at ptr.
func (m *Module) ReadDevice(p []byte, ptr uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkAllocated(ptr, len(p)); err != nil {
		return err
	}
	_, err := unix.Pread(m.gpu, p, int64(ptr-gpuBase))
	return err
}

// WriteDevice simulates cuMemcpyHtoD of p to ptr.
func (m *Module) WriteDevice(ptr uint64, p []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkAllocated(ptr, len(p)); err != nil {
		return err
	}
	_, err := unix.Pwrite(m.gpu, p, int64(ptr-gpuBase))
	return err
}

func (m *Module) checkAllocated(ptr uint64, n int) error {
	for a, size := range m.allocs {
		if ptr >= a && ptr-a <= size && uint64(n) <= size-(ptr-a) {
			return nil
		}
	}
	return fmt.Errorf("fakegdrdrv: [%#x, +%d) is not allocated", ptr, n)
}

// Open opens the node (gdrdrv.c gdrdrv_open). The descriptor is a real
// one, so descriptor leaks show up in /proc/self/fd.
func (m *Module) Open(path string) (int, error) {
	if path != m.cfg.Path {
		return -1, unix.ENOENT
	}
	if m.cfg.OpenErr != 0 {
		return -1, m.cfg.OpenErr
	}
	fd, err := unix.MemfdCreate("fakegdrdrv-file", unix.MFD_CLOEXEC)
	if err != nil {
		return -1, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	f := &file{owner: m.tgid, nextHandle: m.cfg.FirstHandle}
	m.files[fd] = f
	m.live[f] = true
	return fd, nil
}

// Close closes fd. As with a real file, gdrdrv.c gdrdrv_release runs only
// once no mapping refers to the file any more.
func (m *Module) Close(fd int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.dmabufs[fd]; ok {
		delete(m.dmabufs, fd)
		return unix.Close(fd)
	}
	f, ok := m.files[fd]
	if !ok {
		return unix.EBADF
	}
	delete(m.files, fd)
	f.closed = true
	err := unix.Close(fd)
	if f.vmas == 0 {
		err = errors.Join(err, m.release(f))
	}
	return err
}

// release is gdrdrv.c gdrdrv_release.
func (m *Module) release(f *file) error {
	var errs []error
	for _, r := range f.mrs {
		if r.mapType != gdrdrv.MRNone {
			errs = append(errs, m.destroyMappings(r))
		}
		m.freeMR(r)
	}
	f.mrs = nil
	delete(m.live, f)
	return errors.Join(errs...)
}

// minVersion is the first driver version that knows each command; gdrdrv.c
// gdrdrv_ioctl answers ENOTTY to anything else. GET_VERSION appeared with
// the 2.0 betas.
var minVersion = map[uint32]uint32{
	gdrdrv.IocPinBuffer:      2 << 16,
	gdrdrv.IocUnpinBuffer:    0,
	gdrdrv.IocGetCBFlag:      0,
	gdrdrv.IocGetInfo:        0,
	gdrdrv.IocGetVersion:     2 << 16,
	gdrdrv.IocGetInfoV2:      gdrdrv.MinimumVersionWithGetInfoV2,
	gdrdrv.IocGetAttr:        gdrdrv.MinimumVersionWithGetAttr,
	gdrdrv.IocPinBufferV2:    gdrdrv.MinimumVersionWithPinBufferV2,
	gdrdrv.IocReqMappingType: gdrdrv.MinimumVersionWithReqMappingType,
}

// Full structure sizes the module copies (gdrdrv.h).
var structSize = map[uint32]int{
	gdrdrv.IocPinBuffer:      40,
	gdrdrv.IocUnpinBuffer:    8,
	gdrdrv.IocGetCBFlag:      16,
	gdrdrv.IocGetInfo:        48,
	gdrdrv.IocGetInfoV2:      48,
	gdrdrv.IocGetAttr:        8,
	gdrdrv.IocPinBufferV2:    32,
	gdrdrv.IocReqMappingType: 16,
	gdrdrv.IocGetVersion:     8,
}

// Ioctl is gdrdrv.c gdrdrv_ioctl.
func (m *Module) Ioctl(fd int, req uint32, arg unsafe.Pointer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.files[fd]
	if !ok {
		return unix.EBADF
	}
	if m.cfg.OtherDriver {
		return unix.EINVAL
	}
	if req>>8&0xFF != gdrdrv.IoctlType {
		return unix.EINVAL
	}
	if f.owner != m.tgid {
		return unix.EACCES
	}
	minV, known := minVersion[req]
	if !known || m.cfg.Version < minV {
		return unix.ENOTTY
	}
	if arg == nil {
		return unix.EFAULT
	}
	p := unsafe.Slice((*byte)(arg), structSize[req])
	switch req {
	case gdrdrv.IocPinBuffer:
		return m.pinBuffer(f, p)
	case gdrdrv.IocPinBufferV2:
		return m.pinBufferV2(f, p)
	case gdrdrv.IocUnpinBuffer:
		return m.unpinBuffer(f, get64(p, 0))
	case gdrdrv.IocGetCBFlag:
		return m.getCBFlag(f, p)
	case gdrdrv.IocGetInfo:
		return m.getInfo(f, p)
	case gdrdrv.IocGetInfoV2:
		return m.getInfoV2(f, p)
	case gdrdrv.IocGetAttr:
		return m.getAttr(p)
	case gdrdrv.IocReqMappingType:
		return m.reqMappingType(f, p)
	default: // gdrdrv.IocGetVersion
		put32(p, 0, m.cfg.Version)
		put32(p, 4, m.cfg.MinimumAPIVersion)
		return nil
	}
}

// pinBuffer is gdrdrv.c gdrdrv_pin_buffer: addr@0 size@8 p2p_token@16
// va_space@24, handle@32 out.
func (m *Module) pinBuffer(f *file, p []byte) error {
	addr := get64(p, 0)
	if addr == 0 {
		return unix.EINVAL
	}
	h, err := m.pin(f, addr, get64(p, 8), get64(p, 16), get32(p, 24), gdrdrv.PinFlagDefault)
	if err != nil {
		return err
	}
	put64(p, 32, h)
	return nil
}

// pinBufferV2 is gdrdrv.c gdrdrv_pin_buffer_v2: addr@0 size@8 flags@16
// pad@20, handle@24 out.
func (m *Module) pinBufferV2(f *file, p []byte) error {
	addr := get64(p, 0)
	if addr == 0 {
		return unix.EINVAL
	}
	flags := get32(p, 16)
	if flags&^(gdrdrv.PinFlagDefault|gdrdrv.PinFlagForcePCIe) != 0 {
		return unix.EINVAL
	}
	h, err := m.pin(f, addr, get64(p, 8), 0, 0, flags)
	if err != nil {
		return err
	}
	put64(p, 24, h)
	return nil
}

// pin is gdrdrv.c __gdrdrv_pin_buffer.
func (m *Module) pin(f *file, addr, size, token uint64, vaSpace, flags uint32) (uint64, error) {
	va := addr & gdrdrv.GPUPageMask
	end := roundUp(addr+size, gdrdrv.GPUPageSize) // u64 arithmetic, as in C
	r := &mr{
		va:         va,
		mappedSize: end - va,
		offset:     addr & gdrdrv.GPUPageOffset,
	}
	if !m.cfg.Persistent {
		if flags != gdrdrv.PinFlagDefault {
			return 0, unix.EINVAL
		}
	} else {
		if token != 0 || vaSpace != 0 {
			return 0, unix.EINVAL
		}
		if flags&gdrdrv.PinFlagForcePCIe != 0 {
			if !m.cfg.ForcePCIe {
				return 0, unix.EINVAL
			}
			r.forcePCIe = true
		}
	}
	if err := m.nvGetPages(r.va, r.mappedSize); err != nil {
		return 0, err
	}
	// gdr_generate_mr_handle.
	if f.overflow {
		m.pinned -= r.mappedSize
		return 0, unix.ENOMEM
	}
	next := f.nextHandle + max(1, r.mappedSize>>m.pageShift)
	if next&(math.MaxUint64>>m.pageShift) < f.nextHandle {
		f.overflow = true
	}
	r.handle = f.nextHandle
	f.nextHandle = next
	r.pageTable = true
	f.mrs = append([]*mr{r}, f.mrs...)
	return r.handle, nil
}

// nvGetPages stands for nvidia_p2p_get_pages{,_persistent}: every 64 KiB
// page of the range must belong to a live allocation (EINVAL otherwise, as
// for memory that is not the caller's), and BAR1 must have room (ENOMEM).
func (m *Module) nvGetPages(va, length uint64) error {
	if length == 0 || va+length < va {
		return unix.EINVAL
	}
	for pg := va; pg < va+length; pg += gdrdrv.GPUPageSize {
		if !m.pageAllocated(pg) {
			return unix.EINVAL
		}
	}
	if m.cfg.BAR1Size != 0 && m.pinned+length > m.cfg.BAR1Size {
		return unix.ENOMEM
	}
	m.pinned += length
	return nil
}

func (m *Module) pageAllocated(pg uint64) bool {
	for a, size := range m.allocs {
		if a < pg+gdrdrv.GPUPageSize && pg < a+size {
			return true
		}
	}
	return false
}

// lookup is gdrdrv.c gdr_mr_from_handle_unlocked, quirk included: when no
// mr has the handle it returns the last one visited (the oldest pin), and
// nil only when nothing is pinned.
func lookup(f *file, handle uint64) *mr {
	var r *mr
	for _, r = range f.mrs {
		if r.handle == handle {
			break
		}
	}
	return r
}

// unpinBuffer is gdrdrv.c __gdrdrv_unpin_buffer.
func (m *Module) unpinBuffer(f *file, handle uint64) error {
	r := lookup(f, handle)
	if r == nil {
		return unix.EINVAL
	}
	var err error
	if r.mapType != gdrdrv.MRNone {
		err = m.destroyMappings(r)
	}
	for i, x := range f.mrs {
		if x == r {
			f.mrs = append(f.mrs[:i:i], f.mrs[i+1:]...)
			break
		}
	}
	m.freeMR(r)
	return err
}

// freeMR is gdrdrv.c gdr_free_mr_unlocked: put the pages back unless the
// free callback already took them.
func (m *Module) freeMR(r *mr) {
	if r.pageTable {
		m.pinned -= r.mappedSize
		r.pageTable = false
	}
}

// destroyMappings is gdrdrv.c gdr_mr_destroy_all_mappings: zap the VMA
// (unmap_mapping_range; it has no fault handler, so access raises SIGBUS)
// and mark the mr unmapped. mr->vma itself is left set, as in the module.
func (m *Module) destroyMappings(r *mr) error {
	var err error
	if v := r.vma; v != nil && len(v.b) > 0 {
		length := roundUp(uint64(len(v.b)), uint64(m.pageSize))
		_, err = unix.MmapPtr(m.zapFD, 0, unsafe.Pointer(unsafe.SliceData(v.b)), uintptr(length),
			unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_FIXED)
		if err != nil {
			err = fmt.Errorf("fakegdrdrv: zap mapping: %w", err)
		}
	}
	r.mapType = gdrdrv.MRNone
	return err
}

// getCBFlag is gdrdrv.c gdrdrv_get_cb_flag: handle@0, flag@8 out.
func (m *Module) getCBFlag(f *file, p []byte) error {
	r := lookup(f, get64(p, 0))
	if r == nil {
		return unix.EINVAL
	}
	put32(p, 8, b2u(r.cbFlag))
	return nil
}

// getInfo is gdrdrv.c gdrdrv_get_info: handle@0; va@8 mapped_size@16
// page_size@24 tsc_khz@28 tm_cycles@32 mapped@40 wc_mapping@44 out.
func (m *Module) getInfo(f *file, p []byte) error {
	r := lookup(f, get64(p, 0))
	if r == nil {
		return unix.EINVAL
	}
	m.putInfoCommon(p, r)
	put32(p, 40, b2u(r.mapType != gdrdrv.MRNone))
	put32(p, 44, b2u(r.mapType == gdrdrv.MRWC))
	return nil
}

// getInfoV2 is gdrdrv.c gdrdrv_get_info_v2: as getInfo, with
// mapping_type@40 and 4 bytes of padding.
func (m *Module) getInfoV2(f *file, p []byte) error {
	r := lookup(f, get64(p, 0))
	if r == nil {
		return unix.EINVAL
	}
	m.putInfoCommon(p, r)
	put32(p, 40, r.mapType)
	put32(p, 44, 0)
	return nil
}

func (m *Module) putInfoCommon(p []byte, r *mr) {
	put64(p, 8, r.va)
	put64(p, 16, r.mappedSize)
	put32(p, 24, uint32(gdrdrv.GPUPageSize))
	put32(p, 28, 0) // tsc_khz: deprecated (0 on arm64)
	put64(p, 32, 0) // tm_cycles: deprecated
}

// getAttr is gdrdrv.c gdrdrv_get_attr: attr@0, val@4 out. An unknown
// attribute answers EINVAL, and val goes back as the caller wrote it.
func (m *Module) getAttr(p []byte) error {
	switch get32(p, 0) {
	case gdrdrv.AttrUsePersistentMapping:
		put32(p, 4, b2u(m.cfg.Persistent))
	case gdrdrv.AttrSupportPinFlagForcePCIe:
		put32(p, 4, b2u(m.cfg.ForcePCIe && m.cfg.Persistent))
	default:
		return unix.EINVAL
	}
	return nil
}

// reqMappingType is gdrdrv.c gdrdrv_req_mapping_type: handle@0,
// mapping_type@8.
func (m *Module) reqMappingType(f *file, p []byte) error {
	t := get32(p, 8)
	if t > gdrdrv.MRDevice {
		return unix.EINVAL
	}
	r := lookup(f, get64(p, 0))
	if r == nil {
		return unix.EINVAL
	}
	if r.mapType != gdrdrv.MRNone {
		return unix.EBUSY
	}
	switch t {
	case gdrdrv.MRCaching:
		if !m.supportsCache(r) {
			return unix.EOPNOTSUPP
		}
	case gdrdrv.MRWC:
		if m.cfg.DeviceMapping {
			return unix.EOPNOTSUPP
		}
	case gdrdrv.MRDevice:
		if !m.cfg.DeviceMapping {
			return unix.EOPNOTSUPP
		}
	}
	r.reqType = t
	return nil
}

// supportsCache is gdrdrv.c gdr_mr_supports_cache_mapping: FORCE_PCIE pins
// get BAR1 pages, which are never RAM.
func (m *Module) supportsCache(r *mr) bool {
	return m.cfg.Cacheable && !r.forcePCIe && r.pageTable
}

// Mmap is the kernel's mmap entry (offset page aligned, length non-zero)
// followed by gdrdrv.c gdrdrv_mmap.
func (m *Module) Mmap(fd int, offset int64, length int) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d, ok := m.dmabufs[fd]; ok {
		return m.mmapDMABUF(d, offset, length)
	}
	f, ok := m.files[fd]
	if !ok {
		return nil, unix.EBADF
	}
	if length <= 0 || offset < 0 || offset%int64(m.pageSize) != 0 {
		return nil, unix.EINVAL
	}
	if m.cfg.OtherDriver {
		return nil, unix.ENODEV
	}
	if f.owner != m.tgid {
		return nil, unix.EACCES
	}
	pgoff := uint64(offset) >> m.pageShift
	r := lookup(f, pgoff)
	switch {
	case r == nil, // cannot find handle in mr_list
		r.mapType != gdrdrv.MRNone, // mr has been mapped already
		r.cbFlag,                   // mr has been invalidated
		!r.pageTable,               // invalid mr state
		r.offset != 0:              // offset != 0 is not supported
		return nil, unix.EINVAL
	}
	size := roundUp(uint64(length), uint64(m.pageSize))
	if size > r.mappedSize {
		return nil, unix.EINVAL // size too big
	}
	var t uint32
	switch {
	case r.reqType != gdrdrv.MRNone:
		t = r.reqType
	case m.supportsCache(r):
		t = gdrdrv.MRCaching
	case m.cfg.DeviceMapping:
		t = gdrdrv.MRDevice
	default:
		t = gdrdrv.MRWC
	}
	if m.cfg.RemapFails {
		return nil, unix.EAGAIN
	}
	b, err := unix.Mmap(m.gpu, int64(r.va-gpuBase), length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	v := &vma{f: f, pgoff: pgoff, b: b}
	m.vmas[uintptr(unsafe.Pointer(unsafe.SliceData(b)))] = v
	f.vmas++
	r.vma = v
	r.mapType = t
	return b, nil
}

// Munmap unmaps b and runs gdrdrv.c gdrdrv_vma_close for a mapping of the
// module; the last unmap of a closed file releases it.
func (m *Module) Munmap(b []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := unix.Munmap(b); err != nil {
		return err
	}
	return m.vmaClose(b)
}

// Reserve maps an inaccessible anonymous region over b, which unmaps it as
// munmap does (gdrdrv.c gdrdrv_vma_close runs for a mapping of the module).
func (m *Module) Reserve(b []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(b) > 0 {
		_, err := unix.MmapPtr(-1, 0, unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)),
			unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED|unix.MAP_NORESERVE)
		if err != nil {
			return err
		}
	}
	return m.vmaClose(b)
}

// mmapDMABUF maps length bytes at offset of an exported dma-buf, or fails
// as cfg.DMABUFMmapErr says. The caller holds m.mu.
func (m *Module) mmapDMABUF(d dmabuf, offset int64, length int) ([]byte, error) {
	if m.cfg.DMABUFMmapErr != 0 {
		return nil, m.cfg.DMABUFMmapErr
	}
	if length <= 0 || offset < 0 || offset%int64(m.pageSize) != 0 || uint64(offset)+uint64(length) > d.size {
		return nil, unix.EINVAL
	}
	b, err := unix.Mmap(m.gpu, int64(d.va-gpuBase)+offset, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	m.dmabufMaps[uintptr(unsafe.Pointer(unsafe.SliceData(b)))] = true
	return b, nil
}

// vmaClose is gdrdrv.c gdrdrv_vma_close for the mapping at b, if b is one
// of the module's, and forgets a mapping of a dma-buf. The caller holds
// m.mu.
func (m *Module) vmaClose(b []byte) error {
	key := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	delete(m.dmabufMaps, key)
	v, ok := m.vmas[key]
	if !ok {
		return nil
	}
	delete(m.vmas, key)
	if r := lookup(v.f, v.pgoff); r != nil {
		r.vma = nil
		r.mapType = gdrdrv.MRNone
	}
	v.f.vmas--
	if v.f.closed && v.f.vmas == 0 {
		return m.release(v.f)
	}
	return nil
}

func roundUp(x, align uint64) uint64 { return (x + align - 1) &^ (align - 1) }

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

func get32(p []byte, off int) uint32    { return binary.NativeEndian.Uint32(p[off:]) }
func get64(p []byte, off int) uint64    { return binary.NativeEndian.Uint64(p[off:]) }
func put32(p []byte, off int, v uint32) { binary.NativeEndian.PutUint32(p[off:], v) }
func put64(p []byte, off int, v uint64) { binary.NativeEndian.PutUint64(p[off:], v) }

var _ gdrdrv.Syscalls = (*Module)(nil)
