package check_test

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/internal/fixture"
	"github.com/p2pkit/p2pkit/internal/testsupport/testnode"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/procfs"
)

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

func TestNVMLChecks(t *testing.T) {
	cns := gpu.P2PChipsetNotSupported
	for _, tt := range []struct {
		name   string
		id     string
		change func(*gpu.Facts)
		want   outcome
	}{
		{"cc off", "confidential_computing", func(*gpu.Facts) {}, outcome{check.Pass, "confidential computing is off", ""}},
		{"cc on", "confidential_computing", func(f *gpu.Facts) { f.ConfCompute.Enabled = true }, outcome{check.Fail, "confidential computing is on", "CC mode off"}},
		{"cc unsupported", "confidential_computing", func(f *gpu.Facts) { f.ConfCompute = &gpu.ConfCompute{} }, outcome{check.Pass, "not supported", ""}},
		{"p2p ok", "nvml_p2p_status", func(*gpu.Facts) {}, outcome{check.Pass, "allows P2P for all 2 ordered GPU pairs", ""}},
		{"p2p cns", "nvml_p2p_status", func(f *gpu.Facts) { f.Pairs[1].P2P.Read = &cns }, outcome{check.Fail, "refuses P2P for 1 ordered pair", "acs_path"}},
		{"bar1 full", "bar_sizes", func(f *gpu.Facts) { u := uint64(127 << 30); f.GPUs[0].BAR1Used = &u }, outcome{check.Warn, "BAR1 problem on 1 of 2", ""}},
		{"bar1 small", "bar_sizes", func(f *gpu.Facts) { fb := uint64(192 << 30); f.GPUs[1].MemoryTotal = &fb }, outcome{check.Warn, "BAR1 problem on 1 of 2", ""}},
		{"bar1 ok", "bar_sizes", func(*gpu.Facts) {}, outcome{check.Pass, "BAR1 of 2 GPU(s) assigned", ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := withGPUFacts(loadMachine(t, "degraded-link"), tt.change)
			compare(t, tt.want, run1(t, check.NewFacts(n, check.Inputs{}), tt.id))
		})
	}
	t.Run("no NVML", func(t *testing.T) {
		f := check.NewFacts(loadMachine(t, "degraded-link"), check.Inputs{NoNVML: "NVML not queried: --quick"})
		for _, id := range []string{"confidential_computing", "nvml_p2p_status"} {
			compare(t, outcome{check.Skip, "NVML not queried: --quick", ""}, run1(t, f, id))
		}
	})
}

func TestDataIntegrity(t *testing.T) {
	a0, a1 := addr("0000:03:00.0"), addr("0000:04:00.0")
	good := func(src, dst int) check.ProbePair {
		p := check.ProbePair{Src: src, Dst: dst, SrcBDF: a0, DstBDF: a1, PeerAccess: true, Verified: true, HostVerified: true, Mismatch: -1, BytesPerSecond: 48e9}
		if src == 1 {
			p.SrcBDF, p.DstBDF = a1, a0
		}
		return p
	}
	corrupt := good(1, 0)
	corrupt.Verified, corrupt.HostVerified, corrupt.Mismatch = false, false, 4096
	failed := good(1, 0)
	failed.Err = "cuda: cuMemcpyPeer: CUDA_ERROR_ILLEGAL_ADDRESS (700)"
	noPeer := check.ProbePair{Src: 1, Dst: 0, SrcBDF: a1, DstBDF: a0, Mismatch: -1}
	for _, tt := range []struct {
		name  string
		probe *check.ProbeReport
		want  outcome
	}{
		{"not asked", nil, outcome{check.Skip, "pass --probe", ""}},
		{"no cuda", &check.ProbeReport{Skipped: "built without CUDA support (cgo disabled)"}, outcome{check.Skip, "cgo disabled", ""}},
		{"hung", &check.ProbeReport{Size: 64 << 20, Hung: "the copy gpu1->gpu0 did not finish within 2m0s", Pairs: []check.ProbePair{good(0, 1)}},
			outcome{check.Fail, "the probe hung: the copy gpu1->gpu0", "NCCL_P2P_DISABLE=1"}},
		{"verified", &check.ProbeReport{Size: 64 << 20, Pairs: []check.ProbePair{good(0, 1), good(1, 0)}}, outcome{check.Pass, "verified on 2 pair(s)", ""}},
		{"corrupt", &check.ProbeReport{Size: 64 << 20, Pairs: []check.ProbePair{good(0, 1), corrupt}}, outcome{check.Fail, "corrupt data on 1 pair(s)", "NCCL_P2P_DISABLE=1"}},
		{"cuda error", &check.ProbeReport{Size: 64 << 20, Pairs: []check.ProbePair{good(0, 1), failed}}, outcome{check.Error, "failed on 1 pair(s)", ""}},
		{"one without peer", &check.ProbeReport{Size: 64 << 20, Pairs: []check.ProbePair{good(0, 1), noPeer}}, outcome{check.Pass, "1 pair(s) without peer access", ""}},
		{"none with peer", &check.ProbeReport{Size: 64 << 20, Pairs: []check.ProbePair{noPeer}}, outcome{check.Skip, "no GPU pair has peer access", ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			compare(t, tt.want, run1(t, check.NewFacts(loadMachine(t, "degraded-link"), check.Inputs{Probe: tt.probe}), "p2p_data_integrity"))
		})
	}
}

func TestOverallAndExitCode(t *testing.T) {
	r := func(ss ...check.Status) []check.Result {
		var out []check.Result
		for i, s := range ss {
			out = append(out, check.Result{ID: string(rune('a' + i)), Status: s})
		}
		return out
	}
	for _, tt := range []struct {
		name       string
		results    []check.Result
		overall    check.Status
		first      string
		exit, warn int // exit code, and with --fail-on=warn
	}{
		{"empty", nil, check.Pass, "", 0, 0},
		{"skips only", r(check.Skip, check.Skip), check.Pass, "", 0, 0},
		{"warn", r(check.Pass, check.Warn, check.Skip), check.Warn, "b", 0, 2},
		{"fail beats warn", r(check.Warn, check.Fail), check.Fail, "b", 1, 1},
		{"error", r(check.Warn, check.Error), check.Error, "b", 3, 3},
		{"fail beats error", r(check.Error, check.Fail), check.Fail, "b", 1, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := check.Overall(tt.results, nil)
			first := ""
			if f := check.First(tt.results, nil); f != nil {
				first = f.ID
			}
			got := []any{o, first, check.ExitCode(o, false), check.ExitCode(o, true)}
			if diff := cmp.Diff([]any{tt.overall, tt.first, tt.exit, tt.warn}, got); diff != "" {
				t.Errorf("overall, first, exit codes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunSelection(t *testing.T) {
	f := check.NewFacts(loadMachine(t, "degraded-link"), check.Inputs{})
	res, err := check.Run(f, []string{"gdrdrv", "acs_path"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range res {
		ids = append(ids, r.ID)
	}
	if diff := cmp.Diff([]string{"acs_path", "gdrdrv"}, ids); diff != "" {
		t.Errorf("Run keeps catalogue order (-want +got):\n%s", diff)
	}
	if _, err := check.Run(f, []string{"acs"}); err == nil || !strings.Contains(err.Error(), "acs_path") {
		t.Errorf("Run(unknown) error = %v, want one listing the valid ids", err)
	}
	if got := len(check.IDs()); got != len(check.Catalogue()) || got < 18 {
		t.Errorf("catalogue has %d checks", got)
	}
}

func addr(s string) pcie.Address {
	a, err := pcie.ParseAddress(s)
	if err != nil {
		panic(err)
	}
	return a
}

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
