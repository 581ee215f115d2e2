//go:build linux

package p2pmem

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// Alloc maps size bytes of the provider's pool into the process: one mmap of
// p2pmem/allocate, shared, read-write, at offset 0 (p2pmem_alloc_mmap() in
// drivers/pci/p2pdma.c refuses private mappings and non-zero offsets). The kernel
// allocates whole pages; Len reports size as asked. The memory goes back to the pool
// when the Buffer is closed.
//
// Errors wrap ErrPoolExhausted (too little free memory; the message gives what is
// free), fs.ErrPermission (with the fix), ErrNotProvider (the provider went away), or
// the system's error.
func (p *Provider) Alloc(size int) (*Buffer, error) {
	if size <= 0 {
		return nil, fmt.Errorf("p2pmem: invalid allocation size %d", size)
	}
	name := p.allocatePath()
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, p.classify("open", err, size)
	}
	// The mapping keeps its own reference to the file.
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, p.classify("mmap", &fs.PathError{Op: "mmap", Path: name, Err: err}, size)
	}
	return newBuffer(mem), nil
}

// classify maps an error of opening or mapping p2pmem/allocate to the package's
// errors.
func (p *Provider) classify(op string, err error, size int) error {
	var errno unix.Errno
	errors.As(err, &errno)
	switch {
	case errno == unix.ENOMEM:
		free := "unknown"
		if avail, aerr := p.ReadAvailable(); aerr == nil {
			free = fmt.Sprintf("%d", avail)
		}
		return fmt.Errorf("%w: %d bytes asked of %s, %s of %d bytes available: %w",
			ErrPoolExhausted, size, p.dir, free, p.Size, err)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("p2pmem: %w (%s)", err, permissionFix)
	case errno == unix.ENODEV || errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s went away (driver unbound?): %w", ErrNotProvider, p.dir, err)
	}
	return fmt.Errorf("p2pmem: %s: %w", op, err)
}

// Buffer is memory of a provider's pool mapped into the process. It owns the mapping:
// Close returns the memory to the pool. A cleanup unmaps a Buffer that becomes
// unreachable without Close, so keep the Buffer reachable while its Bytes are in use.
type Buffer struct {
	mu      sync.Mutex
	mem     []byte
	cleanup runtime.Cleanup
}

func newBuffer(mem []byte) *Buffer {
	b := &Buffer{mem: mem}
	b.cleanup = runtime.AddCleanup(b, func(m []byte) { _ = unix.Munmap(m) }, mem)
	return b
}

// Bytes returns the mapped memory; it is nil after Close. Loads and stores reach the
// device's BAR, uncached: copy in large blocks.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mem
}

// Len returns the buffer's length in bytes, 0 after Close.
func (b *Buffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.mem)
}

// Close unmaps the buffer, returning its pages to the provider's pool. Calling it
// again does nothing.
func (b *Buffer) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mem == nil {
		return nil
	}
	b.cleanup.Stop()
	err := unix.Munmap(b.mem)
	b.mem = nil
	if err != nil {
		return fmt.Errorf("p2pmem: munmap: %w", err)
	}
	return nil
}
