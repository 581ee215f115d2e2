package check_test

import (
	"slices"
	"testing"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
)

// TestAERGrowth: the counters are judged on growth since the previous run, or on
// the threshold since boot without one.
func TestAERGrowth(t *testing.T) {
	gpu1 := addr("0000:04:00.0") // 37 correctable since boot
	nonFatal := withRecords(loadMachine(t, "degraded-link"), func(r *pcie.Record) {
		if r.Address == gpu1 {
			r.AER = &pcie.AERCounts{Correctable: 37, NonFatal: 2}
		}
	})
	for _, tt := range []struct {
		name string
		n    *node.Node
		aer  check.AERPolicy
		want check.Status
	}{
		{"below the threshold since boot", loadMachine(t, "degraded-link"), check.AERPolicy{}, check.Pass},
		{"at a lower threshold since boot", loadMachine(t, "degraded-link"), check.AERPolicy{Threshold: 37}, check.Warn},
		{"no growth", loadMachine(t, "degraded-link"), check.AERPolicy{Threshold: 1, Previous: map[pcie.Address]pcie.AERCounts{gpu1: {Correctable: 37}}}, check.Pass},
		{"correctable growth", loadMachine(t, "degraded-link"), check.AERPolicy{Threshold: 5, Previous: map[pcie.Address]pcie.AERCounts{gpu1: {Correctable: 30}}}, check.Warn},
		{"counters reset since (reboot)", loadMachine(t, "degraded-link"), check.AERPolicy{Previous: map[pcie.Address]pcie.AERCounts{gpu1: {Correctable: 500}}}, check.Pass},
		{"uncorrectable since boot, no previous run", nonFatal, check.AERPolicy{}, check.Warn},
		{"uncorrectable growth", nonFatal, check.AERPolicy{Previous: map[pcie.Address]pcie.AERCounts{gpu1: {Correctable: 37, NonFatal: 1}}}, check.Fail},
		{"uncorrectable, none new", nonFatal, check.AERPolicy{Previous: map[pcie.Address]pcie.AERCounts{gpu1: {Correctable: 37, NonFatal: 2}}}, check.Pass},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := run1(t, check.NewFacts(tt.n, check.Inputs{AER: tt.aer}), "aer_errors")
			if r.Status != tt.want {
				t.Errorf("aer_errors = %s %q, want %s", r.Status, r.Summary, tt.want)
			}
			if r.Status == check.Fail && !slices.Equal(r.Blocks, []check.Capability{check.CapP2P, check.CapGDR}) {
				t.Errorf("blocks %v, want p2p, gdr for a GPU", r.Blocks)
			}
		})
	}
	r := report(t, "degraded-link")
	if len(r.AER) != 1 || r.AER[0].BDF != gpu1 || r.AER[0].Correctable != 37 {
		t.Errorf("report AER = %+v, want %s's 37", r.AER, gpu1)
	}
}
