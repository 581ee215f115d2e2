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

// TestDataDirect: on the Data Direct node as the kernel leaves it, acs_path fails
// the shape's ports (their bits are not the shape's) and the DMA function and GPU in
// separate IOMMU groups, blocking gdr; after fix's plan and the reboot with its
// parameter (the fixture rebuilt with the values, its groups formed from them), it
// passes.
func TestDataDirect(t *testing.T) {
	n := testnode.Load(t, "gb300-data-direct", node.Options{NoNames: true})
	r := run1(t, check.NewFacts(n, check.Inputs{}), "acs_path")
	if r.Status != check.Fail || !strings.Contains(findings(r), "the Data Direct shape needs 0x0019") ||
		!strings.Contains(findings(r), "Data Direct function and GPU in IOMMU groups") {
		t.Errorf("acs_path before = %s %q:\n%s", r.Status, r.Summary, findings(r))
	}
	var pairs [][2]*pcie.Device
	for _, s := range provision.FindShapes(n.Topology) {
		pairs = append(pairs, [2]*pcie.Device{s.DMA, s.GPUs[0]})
	}
	plan := provision.NewPlan(n.Topology, n.P2P(), pairs, provision.Options{Kernel: n.Release(), IOMMU: true})
	values := map[pcie.Address]uint16{}
	for _, a := range plan.Actions {
		values[a.Device.Address] = a.Planned
	}
	after := testnode.Machine(t, fixture.GB300DataDirect().SetACSControl(values), node.Options{NoNames: true})
	if r := run1(t, check.NewFacts(after, check.Inputs{}), "acs_path"); r.Status != check.Pass {
		t.Errorf("acs_path after = %s %q:\n%s", r.Status, r.Summary, findings(r))
	}
}
