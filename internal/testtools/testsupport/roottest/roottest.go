// Package roottest builds small test roots for the readers of a Linux root (packages
// hostfs, sysfs, procfs and snapshot): the same entries written to a directory, packed
// into a gzip'd tar, or built in memory; and snapshot archives unpacked into a
// root. It is the lowest layer of internal/testtools/testsupport.
package roottest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/p2pkit/p2pkit/hostfs"
)

// Entry is one file of a test tree.
type Entry struct {
	Name   string
	Type   byte // tar.TypeReg (default), TypeDir, TypeSymlink, TypeChar, ...
	Data   string
	Target string
	Mode   int64
	Major  int64
	Minor  int64
}

// File is a regular file holding data.
func File(name, data string) Entry { return Entry{Name: name, Type: tar.TypeReg, Data: data} }

// Symlink is a symbolic link to target.
func Symlink(name, target string) Entry {
	return Entry{Name: name, Type: tar.TypeSymlink, Target: target}
}

// Dir is a directory.
func Dir(name string) Entry { return Entry{Name: name, Type: tar.TypeDir} }

// CharDev is a character device node, mode 0666.
func CharDev(name string, maj, min int64) Entry {
	return Entry{Name: name, Type: tar.TypeChar, Mode: 0o666, Major: maj, Minor: min}
}

func (e Entry) typ() byte {
	if e.Type == 0 {
		return tar.TypeReg
	}
	return e.Type
}

func (e Entry) perm() int64 {
	switch {
	case e.Mode != 0:
		return e.Mode
	case e.typ() == tar.TypeDir:
		return 0o755
	}
	return 0o644
}

// TarGz packs entries, in order, into a gzip'd tar.
func TarGz(t testing.TB, entries []Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.Name, Typeflag: e.typ(), Mode: e.perm(), Linkname: e.Target,
			Devmajor: e.Major, Devminor: e.Minor, ModTime: time.Unix(0, 0)}
		if e.typ() == tar.TypeReg {
			hdr.Size = int64(len(e.Data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("tar header %q: %v", e.Name, err)
		}
		if _, err := io.WriteString(tw, e.Data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// WriteTree writes entries below dir; device nodes are left out (creating them needs
// privileges).
func WriteTree(t testing.TB, dir string, entries []Entry) {
	t.Helper()
	for _, e := range entries {
		p := filepath.Join(dir, filepath.FromSlash(e.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch e.typ() {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeSymlink:
			err = os.Symlink(e.Target, p)
		case tar.TypeChar:
			continue
		default:
			mode := os.FileMode(e.Mode)
			if mode == 0 {
				mode = 0o644
			}
			err = os.WriteFile(p, []byte(e.Data), mode)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Extract unpacks the snapshot at path into a new temporary directory (see
// Unpack).
func Extract(t testing.TB, path string) string {
	t.Helper()
	dir := t.TempDir()
	Unpack(t, path, dir)
	return dir
}

// Unpack writes the snapshot archive at path (a gzip'd tar, as p2pcheck snapshot
// writes) into dir as a root tree: directories; regular files with their
// permission bits, readable by the owner; symbolic links as they are, for sysfs
// resolves them inside the root; device nodes as empty regular files with their
// permission bits, as fixture's NoDeviceNodes writes them. A member whose name
// leaves dir is skipped; a regular file over 64 MiB fails tb.
func Unpack(tb testing.TB, path, dir string) {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
		name := filepath.Clean(strings.TrimPrefix(hdr.Name, "./"))
		if name == "." || !filepath.IsLocal(name) {
			continue
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		perm := fs.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeSymlink:
			err = os.Symlink(hdr.Linkname, p)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(io.LimitReader(tr, maxMember+1)); err == nil && len(b) > maxMember {
				tb.Fatalf("%s: %s is over %d bytes", path, hdr.Name, maxMember)
			}
			if err == nil {
				err = writeFile(p, b, perm|0o400)
			}
		case tar.TypeChar, tar.TypeBlock:
			err = writeFile(p, nil, perm)
		}
		if err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
	}
}

// Mem builds entries, in order, into a root held in memory with
// [hostfs.DefaultBudget].
func Mem(t testing.TB, entries []Entry) hostfs.Root {
	t.Helper()
	b := hostfs.NewMemBuilder(hostfs.DefaultBudget)
	for _, e := range entries {
		name := strings.TrimRight(strings.TrimPrefix(e.Name, "./"), "/")
		perm := fs.FileMode(e.perm())
		var err error
		switch e.typ() {
		case tar.TypeDir:
			err = b.Dir(name, perm)
		case tar.TypeSymlink:
			err = b.Symlink(name, perm, e.Target)
		case tar.TypeChar, tar.TypeBlock:
			err = b.Device(name, perm, e.typ() == tar.TypeChar, uint32(e.Major), uint32(e.Minor))
		default:
			err = b.File(name, perm, []byte(e.Data))
		}
		if err != nil {
			t.Fatalf("%s: %v", e.Name, err)
		}
	}
	return b.Root()
}

// Both returns the same entries as a root on disk and as a root in memory.
func Both(t testing.TB, entries []Entry) (dir, mem hostfs.Root) {
	t.Helper()
	d := t.TempDir()
	WriteTree(t, d, entries)
	r, err := hostfs.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, Mem(t, entries)
}

// maxMember bounds one regular file that Unpack writes.
const maxMember = 64 << 20

// writeFile writes b to p with the permission bits perm, whatever the umask.
func writeFile(p string, b []byte, perm fs.FileMode) error {
	if err := os.WriteFile(p, b, perm); err != nil {
		return err
	}
	return os.Chmod(p, perm)
}
