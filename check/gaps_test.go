package check

import (
	"testing"

	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pcie"
)

// TestVerdictThroughGap: a pair whose walk crosses a function of unknown parent
// (a bridge of its sysfs path was not read) has an unknown verdict in the checks,
// as in pair and pairs; a pair elsewhere keeps its verdict.
func TestVerdictThroughGap(t *testing.T) {
	n := testnode.Load(t, "dgx-h100", node.Options{NoNames: true})
	// Drop the downstream port above GPU 0000:1a:00.0 and NIC 0000:1b:00.0.
	gone := testsupport.Addr(t, "0000:19:00.0")
	var recs []pcie.Record
	for _, d := range n.Topology.Devices {
		if d.Address != gone {
			recs = append(recs, d.Record)
		}
	}
	c := *n
	c.Topology = pcie.NewTopology(recs)
	f := NewFacts(&c, Inputs{Source: Snapshot})
	dev := func(s string) *pcie.Device {
		d := c.Topology.Device(testsupport.Addr(t, s))
		if d == nil {
			t.Fatalf("no %s", s)
		}
		return d
	}
	if v := f.verdict(pair{a: dev("0000:1a:00.0"), b: dev("0000:1e:00.0")}); v.MapType != p2pdma.Unknown {
		t.Errorf("through the missing port: %s (%s), want unknown", v.MapType, v.Reason)
	}
	if v := f.verdict(pair{a: dev("0000:3c:00.0"), b: dev("0000:40:00.0")}); v.MapType == p2pdma.Unknown {
		t.Errorf("elsewhere: unknown (%s), want the kernel's verdict", v.Reason)
	}
}
