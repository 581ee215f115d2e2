package iommugroup_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/iommugroup"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
)

// partition returns the groups as sets of addresses, each set in address order and
// the sets in the order of their first member: a form in which a prediction and
// the groups a kernel numbered compare with ==.
func partition(t *pcie.Topology, group func(d *pcie.Device) (int, bool)) [][]string {
	idx := map[int]int{}
	var out [][]string
	for _, d := range t.Devices {
		g, ok := group(d)
		if !ok {
			continue
		}
		i, seen := idx[g]
		if !seen {
			i = len(out)
			idx[g] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], d.Address.String())
	}
	return out
}

func read(t *pcie.Topology) [][]string {
	return partition(t, func(d *pcie.Device) (int, bool) {
		if d.IOMMUGroup == nil {
			return 0, false
		}
		return *d.IOMMUGroup, true
	})
}

func predicted(t *pcie.Topology, p iommugroup.Prediction) [][]string {
	return partition(t, func(d *pcie.Device) (int, bool) {
		g, ok := p.Group[d.Address]
		return g, ok
	})
}

// TestAgainstKernel: on every guest the kernel tier captured with an IOMMU (root
// ports with ACS, switches without, multifunction devices, a PCIe-to-PCI bridge, the
// ICH9 functions, SR-IOV VFs), the prediction from the ACS values read equals the
// groups the kernel formed.
func TestAgainstKernel(t *testing.T) {
	snaps, err := filepath.Glob("../testdata/vm/*/snapshot.tar.gz")
	if err != nil || len(snaps) == 0 {
		t.Fatalf("no kept captures: %v", err)
	}
	withGroups := 0
	for _, s := range snaps {
		name := filepath.Base(filepath.Dir(s))
		t.Run(name, func(t *testing.T) {
			n := testnode.Snapshot(t, s, node.Options{NoNames: true})
			want := read(n.Topology)
			if len(want) == 0 {
				return // no IOMMU in this guest
			}
			withGroups++
			p := iommugroup.Predict(n.Topology)
			if len(p.Unknown) > 0 {
				t.Fatalf("unknown: %v", p.Unknown)
			}
			if diff := cmp.Diff(want, predicted(n.Topology, p)); diff != "" {
				t.Errorf("groups (-kernel +predicted):\n%s", diff)
			}
			if m := iommugroup.Check(n.Topology, p); len(m) > 0 {
				t.Errorf("Check: %v", m)
			}
		})
	}
	if withGroups < 5 {
		t.Errorf("only %d captures had IOMMU groups", withGroups)
	}
}

// TestAfterReboot: fix-cmb booted with the boot parameter p2pcheck persists for it
// (fix-cmb-persist, the test kernel leaving 0x0000 on root port 00:02.0) formed
// groups that the prediction from fix-cmb with that root port at 0x0000 gives: the
// NVMe functions below it join the root port's group.
func TestAfterReboot(t *testing.T) {
	before := testnode.Snapshot(t, "../testdata/vm/fix-cmb-oracle/snapshot.tar.gz", node.Options{NoNames: true})
	booted := testnode.Snapshot(t, "../testdata/vm/fix-cmb-persist-oracle/snapshot.tar.gz", node.Options{NoNames: true})
	rp := testsupport.Addr(t, "0000:00:02.0")
	after := before.Topology.WithACSControl(map[pcie.Address]uint16{rp: 0x0000})
	p := iommugroup.Predict(after)
	if diff := cmp.Diff(read(booted.Topology), predicted(after, p)); diff != "" {
		t.Errorf("groups after the reboot (-kernel +predicted):\n%s", diff)
	}
	if same, known := p.Same(rp, testsupport.Addr(t, "0000:01:00.1")); !same || !known {
		t.Errorf("root port and NVMe function: same %v, known %v", same, known)
	}
	if diff := cmp.Diff(read(before.Topology), predicted(before.Topology, iommugroup.Predict(before.Topology))); diff != "" {
		t.Errorf("groups before (-kernel +predicted):\n%s", diff)
	}
}

// TestUnknownWithoutRoot: without root ACS is not read, and every group below a
// port whose ACS decides it is unknown, never guessed.
func TestUnknownWithoutRoot(t *testing.T) {
	n := testnode.Load(t, "dgx-h100-nonroot", node.Options{NoNames: true})
	p := iommugroup.Predict(n.Topology)
	if len(p.Unknown) == 0 {
		t.Fatal("no unknown group without root")
	}
	for _, a := range p.Unknown {
		if _, ok := p.Group[a]; ok {
			t.Errorf("%s is both unknown and in a group", a)
		}
	}
}

// TestIrregularACS: redirect cleared on one downstream port of a switch whose other
// port keeps it leaves the two endpoints in separate groups (the kernel's rule looks
// only at the path above each function), and SV off on the root port above merges
// everything below it.
func TestIrregularACS(t *testing.T) {
	m := fixture.New().IOMMU("DMA")
	hb := m.HostBridge(0, 0, 0)
	rp := hb.RootPort(1, 0, fixture.ACS(0x5f, 0x1d), fixture.Label("rp"))
	sw := rp.Switch(2, fixture.ACS(0x5f, 0x1d))
	sw.Down(0).Set(fixture.ACS(0x5f, 0x11))
	sw.Down(0).Endpoint(fixture.ID(0x15b3, 0x1021), fixture.Class(0x020700), fixture.Label("nic"))
	sw.Down(1).Endpoint(fixture.ID(0x10de, 0x2330), fixture.Class(0x030200), fixture.Label("gpu"))
	n := testnode.Machine(t, m, node.Options{NoNames: true})
	nic, gpu := m.Func("nic").Address(), m.Func("gpu").Address()
	p := iommugroup.Predict(n.Topology)
	if same, known := p.Same(nic, gpu); same || !known {
		t.Errorf("irregular ACS: NIC and GPU same %v, known %v", same, known)
	}
	merged := iommugroup.Predict(n.Topology.WithACSControl(map[pcie.Address]uint16{m.Func("rp").Address(): 0x001c}))
	if same, _ := merged.Same(nic, gpu); !same {
		t.Errorf("SV off on the root port: NIC and GPU in groups %d and %d", merged.Group[nic], merged.Group[gpu])
	}
	if got := len(merged.Members(merged.Group[nic])); got != 6 {
		t.Errorf("root port group has %d functions, want 6 (port, switch, two endpoints)", got)
	}
	if !strings.Contains(iommugroup.Mismatch{Address: nic}.String(), nic.String()) {
		t.Error("Mismatch.String lacks the address")
	}
}
