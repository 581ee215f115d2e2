package sysfs

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const h200Snapshot = "../testdata/h200-2gpu-vm/snapshot.tar.gz"

// entry is one file of a test tree, written either to disk or into a tar.
type entry struct {
	name   string
	typ    byte // tar.TypeReg (default), TypeDir, TypeSymlink, TypeChar
	data   string
	target string
	mode   int64
	major  int64
	minor  int64
}

func file(name, data string) entry { return entry{name: name, typ: tar.TypeReg, data: data} }
func symlink(name, target string) entry {
	return entry{name: name, typ: tar.TypeSymlink, target: target}
}
func directory(name string) entry { return entry{name: name, typ: tar.TypeDir} }
func charDev(name string, maj, min int64) entry {
	return entry{name: name, typ: tar.TypeChar, mode: 0o666, major: maj, minor: min}
}

// tarGz packs entries, in order, into a gzip'd tar.
func tarGz(t testing.TB, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
			if typ == tar.TypeDir {
				mode = 0o755
			}
		}
		hdr := &tar.Header{Name: e.name, Typeflag: typ, Mode: mode, Linkname: e.target,
			Devmajor: e.major, Devminor: e.minor, ModTime: time.Unix(0, 0)}
		if typ == tar.TypeReg {
			hdr.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("tar header %q: %v", e.name, err)
		}
		if _, err := io.WriteString(tw, e.data); err != nil {
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

// writeTree writes entries below dir; device nodes are left out (creating them needs
// privileges).
func writeTree(t testing.TB, dir string, entries []entry) {
	t.Helper()
	for _, e := range entries {
		p := filepath.Join(dir, filepath.FromSlash(e.name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch e.typ {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeSymlink:
			err = os.Symlink(e.target, p)
		case tar.TypeChar:
			continue
		default:
			mode := os.FileMode(e.mode)
			if mode == 0 {
				mode = 0o644
			}
			err = os.WriteFile(p, []byte(e.data), mode)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// extract unpacks the trusted test snapshot at path into a new temporary directory.
func extract(t testing.TB, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var entries []entry
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(hdr.Name, "./")
		if name == "" {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, entry{name: name, typ: hdr.Typeflag, data: string(data),
			target: hdr.Linkname, mode: hdr.Mode})
	}
	dir := t.TempDir()
	writeTree(t, dir, entries)
	return dir
}

// openBoth returns the same entries as a directory FS and as a snapshot FS.
func openBoth(t testing.TB, entries []entry) (dirFS, memFS FS) {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, entries)
	d, err := NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	m, err := ReadSnapshot(bytes.NewReader(tarGz(t, entries)))
	if err != nil {
		t.Fatal(err)
	}
	return d, m
}
