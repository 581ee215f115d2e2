package main

import (
	"testing"

	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pathclass"
)

// TestPairSeqOrder checks that pairSeq's counting follows Calculator.All's order:
// the path class of every pair is the one of that verdict's own two devices.
func TestPairSeqOrder(t *testing.T) {
	n := testnode.Machine(t, fixture.DGXH100Like(), node.Options{NoNames: true})
	devs := n.Interesting()
	count := 0
	for p := range pairSeq(n, devs) {
		count++
		a, b := n.Topology.Device(p.Provider), n.Topology.Device(p.Client)
		if a == b {
			t.Fatalf("self pair %s", p.Provider)
		}
		if want := pathclass.NVSMI(a, b, 0).String(); p.PathType != want {
			t.Errorf("%s -> %s: path type %s, want %s", p.Provider, p.Client, p.PathType, want)
		}
	}
	if want := len(devs) * (len(devs) - 1); count != want || count == 0 {
		t.Errorf("%d pairs, want %d", count, want)
	}
}
