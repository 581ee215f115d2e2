//go:build !linux

package p2pmem

import "fmt"

// Alloc maps size bytes of the provider's pool into the process. p2pmem exists only
// on Linux; elsewhere it returns ErrNotSupported.
func (p *Provider) Alloc(size int) (*Buffer, error) {
	return nil, fmt.Errorf("%w: allocate from %s", ErrNotSupported, p.dir)
}

// Buffer is memory of a provider's pool mapped into the process (Linux only).
type Buffer struct{}

// Bytes returns nil: nothing is mapped off Linux.
func (b *Buffer) Bytes() []byte { return nil }

// Len returns 0.
func (b *Buffer) Len() int { return 0 }

// Close does nothing.
func (b *Buffer) Close() error { return nil }
