// Package testnode loads machines for tests the way p2pcheck loads a live one,
// through package node: fixture machines of package fixture written to a
// temporary root, and snapshot files. It is apart from package testsupport, on
// which it builds, because node imports packages (p2pdma, pathclass, pcie) whose
// in-package tests use testsupport; a test package that imports testnode also
// gets testsupport's -update flag.
package testnode

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/node"
)

// Load builds the named fixture machine and loads it (see Machine).
func Load(tb testing.TB, name string, opt node.Options) *node.Node {
	tb.Helper()
	return Machine(tb, testsupport.Fixture(tb, name), opt)
}

// Machine writes m without device nodes to a temporary directory of tb
// ([testsupport.Root]) and reads it back with node.LoadRoot.
func Machine(tb testing.TB, m *fixture.Machine, opt node.Options) *node.Node {
	tb.Helper()
	return Root(tb, testsupport.Root(tb, m), opt)
}

// Root reads the machine whose tree is under dir with node.LoadRoot, as
// p2pcheck --root does.
func Root(tb testing.TB, dir string, opt node.Options) *node.Node {
	tb.Helper()
	n, err := node.LoadRoot(dir, opt)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// Snapshot reads the snapshot file at path with node.LoadSnapshot, as p2pcheck
// --snapshot does.
func Snapshot(tb testing.TB, path string, opt node.Options) *node.Node {
	tb.Helper()
	n, err := node.LoadSnapshot(path, opt)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// SnapshotOf writes m as a snapshot file (its device nodes recorded as the
// fixture writes them) to a temporary directory of tb and reads it back (see
// Snapshot).
func SnapshotOf(tb testing.TB, m *fixture.Machine, opt node.Options) *node.Node {
	tb.Helper()
	var b bytes.Buffer
	if err := m.WriteSnapshot(&b); err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), "snapshot.tar.gz")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		tb.Fatal(err)
	}
	return Snapshot(tb, path, opt)
}
