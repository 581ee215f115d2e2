package check_test

import (
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/provision"
)

// TestVirtHost: on the inline node whose ConnectX NICs have ATS the node is a
// virtualization host: acs_path does not fail the redirect VMs need, and virt_host
// fails the NIC's switch port without Direct Translated P2P and warns that ATS is
// not enabled. With p2pcheck's virtualization-host plan applied (the fixture built
// with the plan's values) and ATS enabled, virt_host passes; asked for bare metal,
// it does not apply and acs_path fails again.
func TestVirtHost(t *testing.T) {
	n := testnode.Load(t, "hgx-inline-ats", node.Options{NoNames: true})
	f := check.NewFacts(n, check.Inputs{})
	if r := run1(t, f, "acs_path"); r.Status != check.Skip || !strings.Contains(r.Summary, "virtualization host") {
		t.Errorf("acs_path = %s %q, want a skip on a virtualization host", r.Status, r.Summary)
	}
	r := run1(t, f, "virt_host")
	if r.Status != check.Fail || !strings.Contains(findings(r), "Direct Translated P2P off") ||
		!strings.Contains(findings(r), "it is not enabled (ATSCtl: Enable-)") || len(r.Blocks) != 1 || r.Blocks[0] != check.CapGDR {
		t.Errorf("virt_host before the plan = %s %q blocks %v:\n%s", r.Status, r.Summary, r.Blocks, findings(r))
	}
	plan := provision.NewPlan(n.Topology, n.P2P(), provision.PairsOfInterest(n.Interesting()),
		provision.Options{Mode: provision.ModeVirtHost, Kernel: n.Release(), IOMMU: true})
	values := map[pcie.Address]uint16{}
	for _, a := range plan.Actions {
		values[a.Device.Address] = a.Planned
	}
	if len(values) != 2 {
		t.Fatalf("plan: %d actions, want the two NIC ports", len(values))
	}
	m := fixture.HGXInline(false).SetACSControl(values)
	for _, nic := range []string{"nic0", "nic1"} {
		m.Func(nic).Set(fixture.ATS(true))
	}
	after := testnode.Machine(t, m, node.Options{NoNames: true})
	fa := check.NewFacts(after, check.Inputs{})
	if r := run1(t, fa, "virt_host"); r.Status != check.Pass {
		t.Errorf("virt_host after the plan = %s %q:\n%s", r.Status, r.Summary, findings(r))
	}
	bare := check.NewFacts(n, check.Inputs{Use: provision.ModeBareMetal})
	if r := run1(t, bare, "virt_host"); r.Status != check.Skip {
		t.Errorf("virt_host asked for bare metal = %s", r.Status)
	}
	if r := run1(t, bare, "acs_path"); r.Status != check.Fail {
		t.Errorf("acs_path asked for bare metal = %s", r.Status)
	}
}

// TestVirtHostNoIsolation: NIC and GPU below a switch whose downstream ports have
// no ACS are in separate IOMMU groups (the kernel groups by the path above the
// switch) although they reach each other directly: virt_host fails it.
func TestVirtHostNoIsolation(t *testing.T) {
	m := fixture.New().IOMMU("DMA")
	rp := m.HostBridge(0, 0, 0).RootPort(1, 0, fixture.ACS(0x5f, 0x1d))
	sw := rp.Switch(2)
	sw.Down(0).Endpoint(fixture.ID(0x15b3, 0x1021), fixture.Class(0x020700), fixture.ATS(true))
	sw.Down(1).Endpoint(fixture.ID(0x10de, 0x2330), fixture.Class(0x030200))
	f := check.NewFacts(testnode.Machine(t, m, node.Options{NoNames: true}), check.Inputs{Use: provision.ModeVirtHost})
	r := run1(t, f, "virt_host")
	if r.Status != check.Fail || !strings.Contains(findings(r), "has no ACS capability") {
		t.Errorf("virt_host = %s:\n%s", r.Status, findings(r))
	}
}

func findings(r check.Result) string {
	var b strings.Builder
	for _, x := range r.Findings {
		b.WriteString(string(x.Status) + " " + x.Subject + ": " + x.Message + "\n")
	}
	return b.String()
}
