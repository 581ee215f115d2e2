package sysfs

import (
	"testing"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/roottest"
	"github.com/p2pkit/p2pkit/snapshot"
)

const h200Snapshot = "../testdata/h200-2gpu-vm/snapshot.tar.gz"

type entry = roottest.Entry

var (
	file      = roottest.File
	symlink   = roottest.Symlink
	directory = roottest.Dir
	writeTree = roottest.WriteTree
	extract   = roottest.Extract
)

// openBoth returns the same entries as an FS on disk and as an FS in memory.
func openBoth(t testing.TB, entries []entry) (dirFS, memFS FS) {
	t.Helper()
	d, m := roottest.Both(t, entries)
	return New(d), New(m)
}

// openSnapshot loads the snapshot file at path.
func openSnapshot(t testing.TB, path string) FS {
	t.Helper()
	r, err := snapshot.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return New(r)
}

// openDir returns an FS reading the /sys of the directory dir.
func openDirFS(dir string) (FS, error) {
	r, err := hostfs.Open(dir)
	if err != nil {
		return FS{}, err
	}
	return New(r), nil
}
