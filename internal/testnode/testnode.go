// Package testnode loads internal/fixture machines the way p2pcheck loads a live
// machine, for tests. It is apart from package fixture because node depends on
// packages (p2pdma) whose own tests use fixture.
package testnode

import (
	"testing"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/internal/fixture"
	"github.com/p2pkit/p2pkit/node"
)

// Load builds the named fixture machine and loads it (see Machine).
func Load(tb testing.TB, name string, opt node.Options) *node.Node {
	tb.Helper()
	m, err := fixture.ByName(name)
	if err != nil {
		tb.Fatal(err)
	}
	return Machine(tb, m, opt)
}

// Machine writes m (without device nodes) to a temporary directory of tb and reads
// it back with node.Load. It fails tb on any error.
func Machine(tb testing.TB, m *fixture.Machine, opt node.Options) *node.Node {
	tb.Helper()
	dir := tb.TempDir()
	if err := m.NoDeviceNodes().Write(dir); err != nil {
		tb.Fatal(err)
	}
	root, err := hostfs.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	defer root.Close()
	n, err := node.Load(root, opt)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}
