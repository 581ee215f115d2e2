package pathclass

import (
	"path/filepath"
	"testing"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/internal/fixture"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/sysfs"
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

func loadFixture(tb testing.TB, name string) *fixtureMachine {
	tb.Helper()
	m, err := fixture.ByName(name)
	if err != nil {
		tb.Fatal(err)
	}
	root := filepath.Join(tb.TempDir(), "root")
	if err := m.Write(root); err != nil {
		tb.Fatal(err)
	}
	fsys, err := hostfs.Open(root)
	if err != nil {
		tb.Fatal(err)
	}
	defer fsys.Close()
	recs, err := sysfs.New(fsys).PCIRecords()
	if err != nil {
		tb.Fatal(err)
	}
	return &fixtureMachine{topo: pcie.NewTopology(recs), m: m}
}

func (fm *fixtureMachine) dev(tb testing.TB, label string) *pcie.Device {
	tb.Helper()
	f := fm.m.Func(label)
	if f == nil {
		tb.Fatalf("no function labelled %q", label)
	}
	d := fm.topo.Device(f.Address())
	if d == nil {
		tb.Fatalf("%s (%s) not in the topology", label, f.Address())
	}
	return d
}
