package check_test

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/node"
)

// flatMachine is n GPUs (10de:2335, conventional PCI functions without
// capabilities, 256 bytes of config) on root buses of their own, 256 to a bus,
// and, with mixed, an RDMA NIC and an NVMe controller on the last bus and an
// IOMMU that translates for all of them (iommu_mode then judges every pair):
// n*(n-1)/2 GPU pairs whose paths share no bridge, the shape of a hostile
// snapshot of thousands of GPUs on one bus.
func flatMachine(n int, mixed bool) *fixture.Machine {
	m := fixture.New().CPU("GenuineIntel", 6, 143, "Intel(R) Xeon(R) Platinum 8480C").CPUs(8).Kernel("6.8.0-60-generic")
	extra := 0
	if mixed {
		extra = 2
		m.IOMMU("DMA")
	}
	var hb *fixture.HostBridge
	for i := range n + extra {
		if i%256 == 0 {
			hb = m.HostBridge(0, uint8(i/256), 0)
		}
		opts := []fixture.Option{fixture.Conventional(), fixture.ID(0x10de, 0x2335), fixture.Class(0x030200), fixture.Driver("nvidia")}
		switch {
		case i == n:
			opts = []fixture.Option{fixture.Conventional(), fixture.ID(0x15b3, 0x1021), fixture.Class(0x020700), fixture.Driver("mlx5_core"), fixture.RDMA("mlx5_0")}
		case i == n+1:
			opts = []fixture.Option{fixture.Conventional(), fixture.ID(0x144d, 0xa824), fixture.Class(0x010802), fixture.Driver("nvme"), fixture.NVMe("nvme0")}
		}
		hb.Endpoint(uint8(i%256/8), uint8(i%8), opts...)
	}
	return m
}

// loadFlat reads flatMachine(n, mixed) back: as a snapshot file up to 4,000
// GPUs, written to a directory above, where a snapshot would hold more members
// than node.LoadSnapshot takes.
func loadFlat(tb testing.TB, n int, mixed bool) *node.Node {
	tb.Helper()
	m := flatMachine(n, mixed).NoDeviceNodes()
	if n <= 4000 {
		return testnode.SnapshotOf(tb, m, node.Options{NoNames: true})
	}
	return testnode.Machine(tb, m, node.Options{NoNames: true})
}

// reportOf runs every check on nd and builds the report, as p2pcheck --snapshot
// does.
func reportOf(tb testing.TB, nd *node.Node) check.Report {
	tb.Helper()
	f := check.NewFacts(nd, check.Inputs{Source: check.Snapshot, NoNVML: "NVML not queried: a snapshot carries no NVML state"})
	res, err := check.Run(f, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return check.NewReport(f, res, testMeta)
}

// cost is what one report of a machine cost, counted rather than timed.
type cost struct {
	allocBytes uint64 // bytes allocated while building it
	allocs     uint64 // allocations while building it
	json       int    // bytes of the JSON report
	lines      int    // findings and subjects it lists
}

func measure(t *testing.T, nd *node.Node) cost {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rep := reportOf(t, nd)
	runtime.ReadMemStats(&after)
	c := cost{
		allocBytes: after.TotalAlloc - before.TotalAlloc,
		allocs:     after.Mallocs - before.Mallocs,
		json:       len(marshal(t, rep)),
	}
	for _, r := range rep.Checks {
		c.lines += len(r.Findings) + len(r.Subjects)
	}
	return c
}

// TestLargeFlatLinear checks, by counting, that the report of a machine with
// many GPUs costs memory linear in its functions: doubling the GPUs multiplies
// the pairs by four, but what the report allocates, lists and writes must grow
// like the functions, by two (three allows for the growth of maps and slices),
// since the pairs are streamed and those listed one by one are capped.
func TestLargeFlatLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("reads trees of 500 and 1,000 GPUs")
	}
	for _, mixed := range []bool{false, true} {
		t.Run(fmt.Sprintf("mixed=%v", mixed), func(t *testing.T) {
			small, large := loadFlat(t, 500, mixed), loadFlat(t, 1000, mixed)
			measure(t, small) // warm up: lazily built tables, sync.Pools
			a, b := measure(t, small), measure(t, large)
			t.Logf("500 GPUs: %+v", a)
			t.Logf("1000 GPUs: %+v", b)
			if b.allocBytes > 3*a.allocBytes || b.allocs > 3*a.allocs {
				t.Errorf("allocation grew from %d B in %d allocations to %d B in %d: it grows with the pairs", a.allocBytes, a.allocs, b.allocBytes, b.allocs)
			}
			if b.json > 3*a.json {
				t.Errorf("the JSON report has %d B for 500 GPUs and %d B for 1000: it grows with the pairs", a.json, b.json)
			}
			if b.lines > 3*a.lines {
				t.Errorf("the report lists %d findings and subjects for 500 GPUs and %d for 1000: it grows with the pairs", a.lines, b.lines)
			}
		})
	}
}

// BenchmarkLargeFlatReport is the whole report of 8,000 GPUs on root buses of
// their own: 32 million pairs of interest.
func BenchmarkLargeFlatReport(b *testing.B) {
	for _, n := range []int{1000, 8000} {
		b.Run(fmt.Sprintf("gpus=%d", n), func(b *testing.B) {
			nd := loadFlat(b, n, true)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				reportOf(b, nd)
			}
		})
	}
}

// TestPairLinesCapped checks that a check lists at most 1,000 pairs one by one
// and counts the others in one finding: 50 GPUs make 1,225 pairs, each refused
// by the kernel's P2PDMA and listed by p2p_reachability as a pass.
func TestPairLinesCapped(t *testing.T) {
	rep := reportOf(t, loadFlat(t, 50, false))
	i := slices.IndexFunc(rep.Checks, func(r check.Result) bool { return r.ID == "p2p_reachability" })
	if i < 0 {
		t.Fatal("no p2p_reachability result")
	}
	r := rep.Checks[i]
	if len(r.Findings) != 1001 {
		t.Fatalf("%d findings, want 1000 pairs and one that counts the rest", len(r.Findings))
	}
	want := check.Finding{Subject: "other pairs", Status: check.Pass, Message: "225 more pair(s) not listed (225 pass): only the first 1000 are"}
	if diff := cmp.Diff(want, r.Findings[1000]); diff != "" {
		t.Errorf("last finding (-want +got):\n%s", diff)
	}
	if !strings.Contains(r.Summary, "1225 not-supported") {
		t.Errorf("summary %q does not count all 1225 pairs", r.Summary)
	}
}
