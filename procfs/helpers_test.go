package procfs

import (
	"testing"

	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/roottest"
)

const h200Snapshot = "../testdata/h200-2gpu-vm/snapshot.tar.gz"

type entry = roottest.Entry

var (
	file      = roottest.File
	directory = roottest.Dir
	charDev   = roottest.CharDev
	writeTree = roottest.WriteTree
)

// openBoth returns the same entries as an FS on disk and as an FS in memory.
func openBoth(t testing.TB, entries []entry) (dirFS, memFS FS) {
	t.Helper()
	d, m := roottest.Both(t, entries)
	return New(d), New(m)
}

// h200 returns the root of the H200 VM's snapshot, unpacked.
func h200(t testing.TB) FS {
	t.Helper()
	fsys, err := NewFS(roottest.Extract(t, h200Snapshot))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	return fsys
}
