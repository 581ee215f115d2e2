package check

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
)

// pathsByPair is what pathDevices and pathBlocks mean, computed the slow way:
// the devices of interest that are peers, and the hops of Topology.Path of
// every pair of interest with the capability the pair needs.
func pathsByPair(f *Facts) (devs []pcie.Address, blocks map[pcie.Address][]Capability) {
	on := map[pcie.Address]bool{}
	blocks = map[pcie.Address][]Capability{}
	for i, d := range f.devices {
		if f.roles[i].peer() {
			on[d.Address] = true
		}
		blocks[d.Address] = deviceBlocks(d)
	}
	for p := range f.pairs() {
		for _, h := range f.Node.Topology.Path(p.a, p.b).Hops {
			on[h.Device.Address] = true
			blocks[h.Device.Address] = appendNew(blocks[h.Device.Address], p.blocks())
		}
	}
	for a := range on {
		devs = append(devs, a)
	}
	slices.SortFunc(devs, func(a, b pcie.Address) int { return a.Compare(b) })
	return devs, blocks
}

// sortedCaps returns cs in capabilities order, nil when empty.
func sortedCaps(cs []Capability) []Capability {
	var out []Capability
	for _, c := range capabilities {
		if slices.Contains(cs, c) {
			out = append(out, c)
		}
	}
	return out
}

// TestPathsAgreeWithPath checks that pathDevices and pathBlocks, which count
// roles below the chain elements instead of visiting pairs, give what the
// union of Topology.Path over every pair of interest gives, on every named
// fixture but the benchmark tree "large".
func TestPathsAgreeWithPath(t *testing.T) {
	for _, name := range fixture.Names() {
		if name == "large" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			n := testnode.Load(t, name, node.Options{NoNames: true})
			f := NewFacts(n, Inputs{Source: Snapshot})
			wantDevs, wantBlocks := pathsByPair(f)
			var gotDevs []pcie.Address
			for _, d := range f.pathDevices() {
				gotDevs = append(gotDevs, d.Address)
			}
			if diff := cmp.Diff(wantDevs, gotDevs); diff != "" {
				t.Errorf("pathDevices (-by pair +by counting):\n%s", diff)
			}
			gotBlocks := map[pcie.Address][]Capability{}
			for d, cs := range f.pathBlocks() {
				gotBlocks[d.Address] = sortedCaps(cs)
			}
			for a, cs := range wantBlocks {
				wantBlocks[a] = sortedCaps(cs)
			}
			if diff := cmp.Diff(wantBlocks, gotBlocks); diff != "" {
				t.Errorf("pathBlocks (-by pair +by counting):\n%s", diff)
			}
		})
	}
}

// TestRoles checks that the pairs of interest are what the roles say: GPU↔GPU,
// GPU↔RDMA NIC, GPU↔NVMe, p2pmem↔GPU/NIC/NVMe, and nothing with a plain device.
func TestRoles(t *testing.T) {
	for _, tc := range []struct {
		a, b role
		want bool
		cap  Capability
	}{
		{roleGPU, roleGPU, true, CapP2P},
		{roleGPU, roleRDMA, true, CapGDR},
		{roleRDMA, roleGPU, true, CapGDR},
		{roleGPU, roleNVMe, true, CapNVMeP2P},
		{roleP2PMem, roleNVMe, true, CapNVMeP2P},
		{roleP2PMem, roleRDMA, true, CapNVMeP2P},
		{roleRDMA, roleNVMe, false, ""},
		{roleRDMA, roleRDMA, false, ""},
		{roleP2PMem, roleP2PMem, false, ""},
		{roleGPU, 0, false, ""},
		{roleNVMe | roleP2PMem, roleNVMe, true, CapNVMeP2P},
	} {
		if got := tc.a.pairsWith(tc.b); got != tc.want {
			t.Errorf("%04b pairsWith %04b = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if tc.want {
			if got := tc.a.pairCap(tc.b); got != tc.cap {
				t.Errorf("%04b pairCap %04b = %s, want %s", tc.a, tc.b, got, tc.cap)
			}
		}
	}
}
