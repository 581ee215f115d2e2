//go:build linux

package p2pmem

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestAllocRegularFileStandIn maps the stand-in allocate file of a fake tree: the
// mapping is shared, so stores land in the file.
func TestAllocRegularFileStandIn(t *testing.T) {
	dir := fakeProvider(t, t.TempDir(), "0000:03:00.0", "1", true, 1<<20)
	p, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	const size = 3 * 4096
	buf, err := p.Alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	if buf.Len() != size || len(buf.Bytes()) != size {
		t.Fatalf("Len = %d, len(Bytes) = %d; want %d", buf.Len(), len(buf.Bytes()), size)
	}
	pattern := bytes.Repeat([]byte("p2pmem!"), size/7+1)[:size]
	copy(buf.Bytes(), pattern)
	if err := buf.Close(); err != nil {
		t.Fatal(err)
	}
	if err := buf.Close(); err != nil {
		t.Errorf("second Close = %v; want nil", err)
	}
	if buf.Bytes() != nil || buf.Len() != 0 {
		t.Errorf("after Close: Bytes %d bytes, Len %d; want none", len(buf.Bytes()), buf.Len())
	}
	got, err := os.ReadFile(filepath.Join(dir, "p2pmem", "allocate"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:size], pattern) {
		t.Error("stores through the shared mapping did not reach the file")
	}
}

func TestAllocErrors(t *testing.T) {
	dir := fakeProvider(t, t.TempDir(), "0000:03:00.0", "1", true, 1<<20)
	p, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Alloc(0); err == nil {
		t.Error("Alloc(0) succeeded")
	}
	if err := os.Remove(p.allocatePath()); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Alloc(4096); !errors.Is(err, ErrNotProvider) {
		t.Errorf("Alloc after allocate vanished = %v; want ErrNotProvider", err)
	}
}

// TestClassify checks the mapping of the kernel's errors from open and mmap of
// p2pmem/allocate (p2pmem_alloc_mmap() in drivers/pci/p2pdma.c).
func TestClassify(t *testing.T) {
	dir := fakeProvider(t, t.TempDir(), "0000:03:00.0", "1", true, 1<<20)
	p, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	mmapErr := func(e unix.Errno) error { return &fs.PathError{Op: "mmap", Path: p.allocatePath(), Err: e} }
	tests := []struct {
		name     string
		err      error
		want     error
		contains string
	}{
		{name: "pool exhausted", err: mmapErr(unix.ENOMEM), want: ErrPoolExhausted,
			contains: "1048576 bytes asked of " + dir + ", 66060288 of 67108864 bytes available"},
		{name: "open as non-root", err: &fs.PathError{Op: "open", Path: p.allocatePath(), Err: unix.EACCES},
			want: fs.ErrPermission, contains: "run as root"},
		{name: "mmap not permitted", err: mmapErr(unix.EPERM), want: fs.ErrPermission, contains: "chgrp"},
		{name: "provider torn down", err: mmapErr(unix.ENODEV), want: ErrNotProvider, contains: "went away"},
		{name: "other", err: mmapErr(unix.EINVAL), want: unix.EINVAL, contains: "p2pmem: mmap:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := p.classify("mmap", tt.err, 1<<20)
			if !errors.Is(got, tt.want) {
				t.Errorf("classify = %v; want it to wrap %v", got, tt.want)
			}
			if !strings.Contains(got.Error(), tt.contains) {
				t.Errorf("classify = %q; want it to contain %q", got, tt.contains)
			}
			if !strings.HasPrefix(got.Error(), "p2pmem: ") {
				t.Errorf("classify = %q; want the package prefix", got)
			}
		})
	}
}
