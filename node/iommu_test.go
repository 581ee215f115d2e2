package node_test

import (
	"testing"

	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/sysfs"
)

// TestLoadTypesInterestingGroups checks that Load reads the IOMMU group type of every
// device of interest, which the checks and diff judge, and of no other group: the
// DGX H100 machine has a group per function or two.
func TestLoadTypesInterestingGroups(t *testing.T) {
	dir := testsupport.Root(t, testsupport.Fixture(t, "dgx-h100"))
	n := testnode.Root(t, dir, node.Options{NoNames: true})
	types := map[int]sysfs.IOMMUDomainType{}
	for _, g := range n.Platform.IOMMUGroups {
		types[g.ID] = g.Type
	}
	interesting := map[int]bool{}
	for _, d := range n.Interesting() {
		if d.IOMMUGroup == nil {
			t.Fatalf("%s has no IOMMU group", d.Address)
		}
		interesting[*d.IOMMUGroup] = true
		if got := types[*d.IOMMUGroup]; got == sysfs.IOMMUNotRead || got == sysfs.IOMMUUnknown {
			t.Errorf("%s: group %d type %v, want it read", d.Address, *d.IOMMUGroup, got)
		}
	}
	read := 0
	for id, typ := range types {
		if typ != sysfs.IOMMUNotRead {
			read++
			if !interesting[id] {
				t.Errorf("group %d, of no device of interest, was read: %v", id, typ)
			}
		}
	}
	if len(interesting) < 10 || len(types) < 2*len(interesting) || read != len(interesting) {
		t.Errorf("%d groups, %d of devices of interest, %d read", len(types), len(interesting), read)
	}
}
