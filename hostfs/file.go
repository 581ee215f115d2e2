package hostfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync/atomic"
)

// This file reads whole files of a known kind: the files outside sysfs that
// p2pcheck reads below a root (/etc/nccl.conf, limits.conf, a library) and, in
// named.go, the files a user names on the command line or a job names in its
// environment. Every such read is bounded twice: by the limit of its [Kind], named
// in the error of a longer file, and by the [Meter] of the run, which all reads of
// one run share.

// Kind is a kind of file read whole, and the most bytes of one that are read. Its
// name is what the error for a longer file calls it ("NCCL configuration file").
type Kind struct {
	Name  string
	Limit int64
}

// tooLarge is the error for a file of kind k longer than its limit.
func (k Kind) tooLarge() error {
	return fmt.Errorf("%w: %s (the limit for a %s)", ErrTooLarge, byteCount(k.Limit), k.Name)
}

// byteCount writes n bytes in the largest binary unit that divides it.
func byteCount(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// Meter counts the bytes one run reads, from every root and every named file,
// against one limit (Budget.RunBytes): a run that reads many files each within its
// limit still ends. A Meter may be shared by several goroutines. A nil *Meter
// counts nothing.
type Meter struct {
	used   atomic.Int64
	limit  int64
	parent *Meter
}

// NewMeter returns a Meter of limit bytes.
func NewMeter(limit int64) *Meter { return &Meter{limit: limit} }

// Sub returns a Meter of limit bytes for one part of the run (a library search)
// whose reads count on m too.
func (m *Meter) Sub(limit int64) *Meter { return &Meter{limit: limit, parent: m} }

// Used returns the bytes read so far.
func (m *Meter) Used() int64 {
	if m == nil {
		return 0
	}
	return m.used.Load()
}

// charge records n more bytes read; past the limit it is an error wrapping
// [ErrBudget].
func (m *Meter) charge(n int) error {
	if m == nil || n <= 0 {
		return nil
	}
	if m.used.Add(int64(n)) > m.limit {
		if m.parent != nil {
			return overBudget("RunBytes", m.limit, "bytes read for this part of the run")
		}
		return overBudget("RunBytes", m.limit, "bytes read in one run")
	}
	return m.parent.charge(n)
}

// WithMeter returns r counting its reads on m, so that every root and named file
// of one run shares one budget. [Open] and [MemBuilder.Root] give each Root a
// Meter of its own.
func (r Root) WithMeter(m *Meter) Root {
	r.meter = m
	return r
}

// Meter returns the Meter r counts its reads on.
func (r Root) Meter() *Meter { return r.meter }

// ReadKind reads the whole regular file name below r, a file of kind k: at most
// k.Limit bytes, a longer file being an error that names the kind and its limit.
// Like every read of a Root it stays inside the root and opens nothing but a
// regular file, without blocking (see [Root.Read]). Errors are [*fs.PathError]
// naming the absolute path.
func (r Root) ReadKind(name string, k Kind) ([]byte, error) {
	b, err := r.t.readAll(name, int(k.Limit))
	if err == nil && int64(len(b)) > k.Limit {
		err = k.tooLarge()
	}
	if err == nil {
		err = r.meter.charge(len(b))
	}
	if err != nil {
		return nil, PathError("read", name, err)
	}
	return b, nil
}

// File is a regular file of one [Kind] opened for one read from its start: a read
// past the kind's limit is an error naming it, and every byte counts on the run's
// [Meter]. Close it when done.
type File struct {
	ra   io.ReaderAt
	c    io.Closer
	off  int64
	size int64 // the size when opened; -1 when unknown
	kind Kind
	m    *Meter
	path string // for errors
	op   string
}

// OpenKind opens the regular file name below r, a file of kind k, for reading in
// pieces (a library scanned for a string), with the rules of [Root.ReadKind].
func (r Root) OpenKind(name string, k Kind) (*File, error) {
	ra, size, err := r.t.openReaderAt(name)
	if err != nil {
		return nil, PathError("open", name, err)
	}
	return &File{ra: ra, c: ra, size: size, kind: k, m: r.meter, path: "/" + name, op: reader(name) + ": read"}, nil
}

// Read reads the next bytes of the file. Past the kind's limit it returns an
// error wrapping [ErrTooLarge]; at the end of the file, io.EOF.
func (f *File) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	room := f.kind.Limit + 1 - f.off
	if room <= 0 {
		return 0, f.err(f.kind.tooLarge())
	}
	p = p[:min(int64(len(p)), room)]
	n, err := f.ra.ReadAt(p, f.off)
	f.off += int64(n)
	if cerr := f.m.charge(n); cerr != nil {
		return n, f.err(cerr)
	}
	if f.off > f.kind.Limit {
		return n - int(f.off-f.kind.Limit), f.err(f.kind.tooLarge())
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return n, f.err(err)
	}
	return n, err
}

// Size returns the file's size when it was opened, -1 when unknown.
func (f *File) Size() int64 { return f.size }

// Close closes the file. Calling it more than once is harmless.
func (f *File) Close() error {
	if f.c == nil {
		return nil
	}
	c := f.c
	f.c = nil
	return c.Close()
}

func (f *File) err(err error) error { return &fs.PathError{Op: f.op, Path: f.path, Err: err} }

// FileID identifies a file of a root, as a device and inode number do on disk:
// two names with the same FileID are the same file.
type FileID struct{ dev, ino uint64 }

// FileID returns the identity of the file name leads to, its final link followed.
func (r Root) FileID(name string) (FileID, error) {
	id, err := r.t.fileID(name)
	if err != nil {
		return FileID{}, PathError("stat", name, err)
	}
	return id, nil
}

// Glob returns the names below r that match pattern, a slash-separated, root-
// relative pattern of [path.Match] elements ("usr/lib/python3*/site-packages"),
// sorted, at most max of them (more is an error wrapping [ErrBudget]). Directories
// are listed inside the root only, their links followed as every read of r
// follows them; a directory that cannot be listed matches nothing.
func (r Root) Glob(pattern string, max int) ([]string, error) {
	if _, err := path.Match(pattern, ""); err != nil {
		return nil, err
	}
	dirs := []string{"."}
	for el := range strings.SplitSeq(pattern, "/") {
		var next []string
		for _, d := range dirs {
			if !hasMeta(el) {
				next = append(next, path.Join(d, el))
				continue
			}
			names, err := r.t.names(d)
			if err != nil {
				continue
			}
			for _, n := range names {
				if ok, _ := path.Match(el, n); ok {
					next = append(next, path.Join(d, n))
				}
			}
			if len(next) > max {
				return nil, PathError("glob", pattern, overBudget("Glob", int64(max), "names matching one pattern"))
			}
		}
		dirs = next
	}
	var out []string
	for _, n := range dirs {
		if _, err := r.t.lstat(n); err == nil {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// hasMeta reports whether el holds a path.Match metacharacter.
func hasMeta(el string) bool { return strings.ContainsAny(el, `*?[\`) }
