package pcie

import (
	"errors"
	"fmt"
	"io"
)

// space is configuration space as the decoder sees it. b has the space's full
// readable size; when load is set, ranges are read into b on first use, so the
// decoder reads only the registers it looks at.
type space struct {
	b      []byte
	load   func(off, n int) error
	loaded []bool // per configChunk, when load is set
	err    error  // first load error
}

// configChunk is the unit ReadConfig reads: one register. The registers a decoder
// step asks for that are not read yet are read in one pread, so reading by register
// costs no more system calls than the ranges the decoder asks for, and no register
// access it does not need (four-register units read 69 of an H200's registers where the
// decoder needs 33).
const configChunk = 4

// has reports whether [off, off+n) lies inside the space, reading it first if the
// space is loaded lazily. A read error makes it false and is kept in s.err.
func (s *space) has(off, n int) bool {
	if off < 0 || n < 0 || off+n > len(s.b) {
		return false
	}
	if s.load == nil {
		return true
	}
	end := (off + n + configChunk - 1) / configChunk
	for c := off / configChunk; c < end; {
		if s.loaded[c] {
			c++
			continue
		}
		run := c
		for run < end && !s.loaded[run] {
			run++
		}
		if err := s.load(c*configChunk, (run-c)*configChunk); err != nil {
			if s.err == nil {
				s.err = err
			}
			return false
		}
		for ; c < run; c++ {
			s.loaded[c] = true
		}
	}
	return true
}

// ReadConfig reads, from r (a sysfs config file of the given size), the registers
// ParseConfig decodes and nothing else, and returns them as a configuration space
// that ParseConfig decodes identically (registers never read are zero), with the
// decoded Config. The slice is as long as what the caller may read: size for root,
// the 64-byte header for an unprivileged reader, whose reads past it return nothing
// (drivers/pci/pci-sysfs.c pci_read_config). A space that reads but does not
// decode (all ones) is returned with a nil Config and the decoding error.
//
// Every register read through sysfs is a separate configuration cycle, and in a
// virtual machine each one traps to the hypervisor: reading 4 KiB of extended
// space costs a thousand exits, a handful of capabilities a few dozen.
func ReadConfig(r io.ReaderAt, size int) ([]byte, *Config, error) {
	if size > ConfigExpSize {
		size = ConfigExpSize
	}
	if size < ConfigHeaderSize {
		return nil, nil, fmt.Errorf("%w: %d bytes, want at least %d", ErrInvalidConfig, size, ConfigHeaderSize)
	}
	b := make([]byte, size)
	// The header and, past it, the register where the first capability often is, in
	// one read: a reader without CAP_SYS_ADMIN gets the header alone.
	probe := min(ConfigHeaderSize+configChunk, size)
	n, err := r.ReadAt(b[:probe], 0)
	if n < ConfigHeaderSize {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, nil, fmt.Errorf("pcie: reading config header: %w", err)
	}
	if n == ConfigHeaderSize && size > ConfigHeaderSize {
		// Not CAP_SYS_ADMIN: the kernel stops at the header.
		b = b[:ConfigHeaderSize]
		c, err := ParseConfig(b)
		return b, c, err
	}
	loaded := ConfigHeaderSize
	if n == ConfigHeaderSize+configChunk {
		loaded += configChunk
	}
	s := &space{b: b, loaded: make([]bool, (size+configChunk-1)/configChunk)}
	for c := range loaded / configChunk {
		s.loaded[c] = true
	}
	s.load = func(off, n int) error {
		n = min(n, len(b)-off)
		if got, err := r.ReadAt(b[off:off+n], int64(off)); got < n {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("pcie: reading config at %#x: %w", off, err)
		}
		return nil
	}
	c, err := parseSpace(s)
	if s.err != nil {
		return nil, nil, s.err
	}
	return b, c, err
}
