package check_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
)

// TestPCIeLinkCases: an idle GPU's lower speed is explained as power saving, a
// narrower link as lost lanes, a Gen5 NIC in a Gen4 slot as capped by the
// slot, and an NVMe controller's narrower own capability is no fault.
func TestPCIeLinkCases(t *testing.T) {
	const (
		gpuID = 0x2330
		nicID = 0x1021
	)
	for _, tt := range []struct {
		name  string
		build func(rp *fixture.Function)
		want  outcome
		msg   string
	}{
		{"idle GPU", func(rp *fixture.Function) {
			rp.Endpoint(fixture.ID(0x10de, gpuID), fixture.Class(0x030200), fixture.Link(5, 16), fixture.Trained(1, 16),
				fixture.BAR(1, 1<<30, true, true))
		}, outcome{check.Warn, "1 of 1 links", "re-check under load"}, "an idle GPU lowers its link speed"},
		{"lost lanes", func(rp *fixture.Function) {
			rp.Endpoint(fixture.ID(0x10de, gpuID), fixture.Class(0x030200), fixture.Link(5, 16), fixture.Trained(5, 4),
				fixture.BAR(1, 1<<30, true, true))
		}, outcome{check.Warn, "1 of 1 links", "reseat"}, "width lost"},
		{"NVMe x4 in an x16 port", func(rp *fixture.Function) {
			rp.Endpoint(fixture.ID(0x144d, 0xa824), fixture.Class(0x010802), fixture.Link(4, 4))
		}, outcome{check.Pass, "1 links run at the best both ends support", ""}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := fixture.New().CPU("GenuineIntel", 6, 143, "Intel(R) Xeon(R)").CPUs(8).Kernel("6.8.0")
			hb := m.HostBridge(0, 0, 0)
			hb.Endpoint(0, 0, fixture.ID(0x8086, 0x09a2), fixture.Class(0x088000))
			tt.build(hb.RootPort(1, 0, fixture.ID(0x8086, 0x352a), fixture.Link(5, 16)))
			r := run1(t, check.NewFacts(testnode.Machine(t, m, node.Options{NoNames: true}), check.Inputs{}), "pcie_link")
			compare(t, tt.want, r)
			if tt.msg != "" && (len(r.Findings) != 1 || !strings.Contains(r.Findings[0].Message, tt.msg)) {
				t.Errorf("findings %+v, want one saying %q", r.Findings, tt.msg)
			}
		})
	}
	t.Run("slot caps a NIC", func(t *testing.T) {
		m := fixture.New().CPU("GenuineIntel", 6, 143, "Intel(R) Xeon(R)").CPUs(8).Kernel("6.8.0")
		hb := m.HostBridge(0, 0, 0)
		hb.Endpoint(0, 0, fixture.ID(0x8086, 0x09a2), fixture.Class(0x088000))
		hb.RootPort(1, 0, fixture.ID(0x8086, 0x352a), fixture.Link(4, 16)).
			Endpoint(fixture.ID(0x15b3, nicID), fixture.Class(0x020700), fixture.Link(5, 16), fixture.RDMA("mlx5_0"))
		r := run1(t, check.NewFacts(testnode.Machine(t, m, node.Options{NoNames: true}), check.Inputs{}), "pcie_link")
		if r.Status != check.Warn || len(r.Findings) != 1 || !strings.Contains(r.Findings[0].Message, "the slot caps the link") {
			t.Errorf("pcie_link = %s %+v, want a warning that the slot caps the link", r.Status, r.Findings)
		}
	})
}

// TestPCIeLinkUnknown: a link whose state could not be read is unknown, with the
// files to read.
func TestPCIeLinkUnknown(t *testing.T) {
	gpu1 := addr("0000:04:00.0")
	n := withRecords(loadMachine(t, "degraded-link"), func(r *pcie.Record) {
		if r.Address == gpu1 {
			r.Config, r.CurrentLink, r.MaxLink = nil, pcie.Link{}, pcie.Link{}
		}
	})
	r := run1(t, check.NewFacts(n, check.Inputs{}), "pcie_link")
	if r.Status != check.Unknown || !slices.Contains(r.Subjects, gpu1.String()) || len(r.Remediation) == 0 || !strings.Contains(r.Remediation[0], "current_link_speed") {
		t.Errorf("pcie_link = %s %v %q, want unknown on %s naming current_link_speed", r.Status, r.Subjects, r.Remediation, gpu1)
	}
}
