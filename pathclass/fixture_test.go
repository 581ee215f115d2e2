package pathclass

import (
	"testing"

	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/pcie"
)

// TestFixtureMachines classes pairs of synthetic machines written as sysfs trees and
// read back through sysfs and pcie.NewTopology.
func TestFixtureMachines(t *testing.T) {
	tests := []struct {
		machine, a, b string
		nvsmi, nccl   Class
	}{
		// One level-1 PEX switch.
		{"dgx-h100", "gpu0", "nic0", PIX, PIX},
		// Two level-1 switches below one level-0 switch: nvidia-smi sees several
		// switches, NCCL folds the Broadcom Gen5 levels into one.
		{"dgx-h100", "gpu0", "gpu1", PXB, PIX},
		// Root buses 15 and 37, both on NUMA node 0.
		{"dgx-h100", "gpu0", "gpu2", NODE, PHB},
		// Root buses 15 (node 0) and 9a (node 1).
		{"dgx-h100", "gpu0", "gpu4", SYS, SYS},
		{"dgx-h100", "nic0", "nvme0", PXB, PIX},
		// Different root ports of one root complex.
		{"amd-epyc", "gpu0", "nic0", PHB, PHB},
		// Root complexes 00 and 40 on node 0; 00 and 80 across nodes.
		{"amd-epyc", "gpu0", "gpu1", NODE, PHB},
		{"amd-epyc", "gpu0", "gpu2", SYS, SYS},
		{"degraded-link", "gpu0", "gpu1", PIX, PIX},
		{"sriov-nic", "vf0", "vf1", PHB, PHB},
	}
	loaded := map[string]*fixtureMachine{}
	for _, tt := range tests {
		t.Run(tt.machine+"/"+tt.a+"-"+tt.b, func(t *testing.T) {
			m := loaded[tt.machine]
			if m == nil {
				m = loadFixture(t, tt.machine)
				loaded[tt.machine] = m
			}
			a, b := m.dev(t, tt.a), m.dev(t, tt.b)
			if got := NVSMI(a, b, 0); got.Class != tt.nvsmi {
				t.Errorf("NVSMI = %v; want %v", got, tt.nvsmi)
			}
			if got := NCCL(a, b); got.Class != tt.nccl {
				t.Errorf("NCCL = %v; want %v", got, tt.nccl)
			}
		})
	}
}

type fixtureMachine struct {
	topo *pcie.Topology
	m    *fixture.Machine
}

// loadFixture writes the named fixture machine to a temporary root and reads its
// topology back.
func loadFixture(tb testing.TB, name string) *fixtureMachine {
	tb.Helper()
	m := testsupport.Fixture(tb, name)
	return &fixtureMachine{topo: testsupport.Topology(tb, testsupport.OpenRoot(tb, testsupport.Root(tb, m))), m: m}
}

func (fm *fixtureMachine) dev(tb testing.TB, label string) *pcie.Device {
	tb.Helper()
	return testsupport.Device(tb, fm.topo, fm.m, label)
}
