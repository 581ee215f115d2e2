package testnode

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
)

func addresses(n *node.Node) []pcie.Address {
	var out []pcie.Address
	for _, d := range n.Topology.Devices {
		out = append(out, d.Address)
	}
	return out
}

// TestLoadAgree: a fixture read from a root and from its snapshot file are the
// same machine, and the named and the built fixture are too.
func TestLoadAgree(t *testing.T) {
	opt := node.Options{NoNames: true}
	root := Load(t, "degraded-link", opt)
	if len(root.Topology.Devices) == 0 || root.P2P().CPUVendor == "" {
		t.Fatalf("loaded %d functions, CPU vendor %q", len(root.Topology.Devices), root.P2P().CPUVendor)
	}
	for name, n := range map[string]*node.Node{
		"Machine":    Machine(t, fixture.DegradedLink(), opt),
		"SnapshotOf": SnapshotOf(t, fixture.DegradedLink(), opt),
	} {
		if diff := cmp.Diff(addresses(root), addresses(n)); diff != "" {
			t.Errorf("%s differs from Load (-Load +%s):\n%s", name, name, diff)
		}
		if n.P2P() != root.P2P() {
			t.Errorf("%s: platform %+v, Load %+v", name, n.P2P(), root.P2P())
		}
	}
}
