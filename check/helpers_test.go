package check_test

import (
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/procfs"
	"github.com/p2pkit/p2pkit/sysfs"
)

// statuses maps each check of a report to its status.
func statuses(r check.Report) map[string]check.Status {
	m := map[string]check.Status{}
	for _, c := range r.Checks {
		m[c.ID] = c.Status
	}
	return m
}

func result(t *testing.T, r check.Report, id string) check.Result {
	t.Helper()
	for _, c := range r.Checks {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("no result for %s", id)
	return check.Result{}
}

// run1 runs one check on facts.
func run1(t *testing.T, f *check.Facts, id string) check.Result {
	t.Helper()
	res, err := check.Run(f, []string{id})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].ID != id {
		t.Fatalf("Run(%s) = %d results", id, len(res))
	}
	return res[0]
}

// outcome is what the table tests compare: status and the first remediation.
type outcome struct {
	Status  check.Status
	Summary string // a substring of the summary
	Fix     string // a substring of the first remediation, "" for none
}

func compare(t *testing.T, want outcome, r check.Result) {
	t.Helper()
	got := outcome{Status: r.Status, Summary: want.Summary, Fix: want.Fix}
	if !strings.Contains(r.Summary, want.Summary) {
		got.Summary = r.Summary
	}
	switch {
	case want.Fix == "" && len(r.Remediation) > 0:
		got.Fix = r.Remediation[0]
	case want.Fix != "" && (len(r.Remediation) == 0 || !strings.Contains(r.Remediation[0], want.Fix)):
		got.Fix = strings.Join(r.Remediation, " | ")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", r.ID, diff)
	}
}

func charDev(major uint32, perm fs.FileMode) *procfs.DevNode {
	return &procfs.DevNode{Mode: fs.ModeDevice | fs.ModeCharDevice | perm, Major: major, NumberKnown: true}
}

// withGPUFacts gives the degraded-link machine's two GPUs NVML facts.
func withGPUFacts(n *node.Node, change func(*gpu.Facts)) *node.Node {
	a0, a1 := addr("0000:03:00.0"), addr("0000:04:00.0")
	ok := gpu.P2POK
	total, used, fb := uint64(128<<30), uint64(2<<20), uint64(80<<30)
	f := &gpu.Facts{
		DriverVersion: "570.133.20", CUDADriverVersion: 12080,
		ConfCompute: &gpu.ConfCompute{Supported: true, Environment: "prod"},
		GPUs: []gpu.GPU{
			{Index: 0, UUID: "GPU-0", Address: &a0, BAR1Total: &total, BAR1Used: &used, MemoryTotal: &fb},
			{Index: 1, UUID: "GPU-1", Address: &a1, BAR1Total: &total, BAR1Used: &used, MemoryTotal: &fb},
		},
		Pairs: []gpu.Pair{{A: 0, B: 1, P2P: gpu.P2PCaps{Read: &ok, Write: &ok}}, {A: 1, B: 0, P2P: gpu.P2PCaps{Read: &ok, Write: &ok}}},
	}
	change(f)
	n.GPU = f
	return n
}

func addr(s string) pcie.Address {
	a, err := pcie.ParseAddress(s)
	if err != nil {
		panic(err)
	}
	return a
}

// verdict is what the rule tables compare: status, what it blocks, a substring
// of the summary and of the first remediation ("" for none).
type verdict struct {
	Status  check.Status
	Blocks  []check.Capability
	Summary string
	Fix     string
}

func judge(t *testing.T, want verdict, r check.Result) {
	t.Helper()
	if diff := cmp.Diff(want.Blocks, r.Blocks); diff != "" {
		t.Errorf("%s blocks (-want +got):\n%s", r.ID, diff)
	}
	compare(t, outcome{Status: want.Status, Summary: want.Summary, Fix: want.Fix}, r)
}

var (
	p2p     = []check.Capability{check.CapP2P}
	gdr     = []check.Capability{check.CapGDR}
	gdrcopy = []check.Capability{check.CapGDRCopy}
	nvmeP2P = []check.Capability{check.CapNVMeP2P}
)

// withIOMMU sets every IOMMU group of n to typ.
func withIOMMU(n *node.Node, typ sysfs.IOMMUDomainType) {
	groups := make([]sysfs.IOMMUGroup, len(n.Platform.IOMMUGroups))
	for i, g := range n.Platform.IOMMUGroups {
		groups[i] = sysfs.IOMMUGroup{ID: g.ID, Type: typ}
	}
	n.Platform.IOMMUGroups = groups
}

// nvlinkFacts gives the GPUs at addrs NVML facts: NVLink to NVSwitches when
// switched, PCIe only otherwise.
func nvlinkFacts(addrs []pcie.Address, switched bool) *gpu.Facts {
	f := &gpu.Facts{}
	ok := gpu.P2POK
	for i := range addrs {
		g := gpu.GPU{Index: i, Address: &addrs[i], NVLink: &gpu.NVLink{}}
		if switched {
			g.NVLink = &gpu.NVLink{Active: 18, Links: []gpu.NVLinkPeer{{Link: 0, RemoteType: "switch"}}}
		}
		f.GPUs = append(f.GPUs, g)
		for j := range addrs {
			if i != j {
				f.Pairs = append(f.Pairs, gpu.Pair{A: i, B: j, P2P: gpu.P2PCaps{Read: &ok, Write: &ok}})
			}
		}
	}
	return f
}

// withoutNICs drops n's NICs on a copy of its topology: loadMachine's nodes share
// their Topology with the cache.
func withoutNICs(n *node.Node) {
	t := *n.Topology
	t.Devices = slices.DeleteFunc(slices.Clone(t.Devices), (*pcie.Device).IsNIC)
	n.Topology = &t
}

// withRecords returns a copy of n whose records change edited, the tree rebuilt.
func withRecords(n *node.Node, change func(r *pcie.Record)) *node.Node {
	recs := make([]pcie.Record, len(n.Topology.Devices))
	for i, d := range n.Topology.Devices {
		recs[i] = d.Record
		change(&recs[i])
	}
	c := *n
	c.Topology = pcie.NewTopology(recs)
	return &c
}

// gpuCase is a rule-table row on the degraded-link machine with NVML facts
// (withGPUFacts) changed by change.
type gpuCase struct {
	name   string
	change func(*gpu.Facts)
	want   verdict
}

// runGPUCases runs check id on each case.
func runGPUCases(t *testing.T, id string, cases []gpuCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			n := withGPUFacts(loadMachine(t, "degraded-link"), tt.change)
			judge(t, tt.want, run1(t, check.NewFacts(n, check.Inputs{}), id))
		})
	}
}
