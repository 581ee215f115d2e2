package check_test

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/gpu"
)

func TestNVMLP2P(t *testing.T) {
	cns := gpu.P2PChipsetNotSupported
	runGPUCases(t, "nvml_p2p_status", []gpuCase{
		{"ok", func(*gpu.Facts) {}, verdict{check.Pass, nil, "allows P2P for all 2 ordered GPU pairs", ""}},
		{"cns", func(f *gpu.Facts) { f.Pairs[1].P2P.Read = &cns }, verdict{check.Fail, p2p, "refuses P2P for 1 ordered pair", "acs_path"}},
		{"unknown", func(f *gpu.Facts) { f.Pairs[1].P2P.Read = nil }, verdict{check.Unknown, p2p, "did not report P2P status for 1 of 2", ""}},
	})
	f := check.NewFacts(loadMachine(t, "degraded-link"), check.Inputs{NoNVML: "NVML not queried: --quick"})
	compare(t, outcome{check.Skip, "NVML not queried: --quick", ""}, run1(t, f, "nvml_p2p_status"))
}

// TestNVMLP2PInVM: in a VM with two GPUs nothing but NVML's P2P status or the
// probe confirms P2P: without both, a required p2p is unknown (exit 3), not a
// warning; the 2-GPU H200 VM capture with its recorded NVML facts passes.
func TestNVMLP2PInVM(t *testing.T) {
	for _, tt := range []struct {
		name    string
		machine string
		in      check.Inputs
		nvml    bool
		want    check.Status
		overall check.Status
	}{
		{"vm-acs, no NVML", "vm-acs", check.Inputs{NoNVML: "NVML not queried"}, false, check.Unknown, check.Unknown},
		{"H200 VM capture, no NVML", "h200-2gpu-vm", check.Inputs{NoNVML: "NVML not queried"}, false, check.Unknown, check.Unknown},
		{"vm-acs, probe verified", "vm-acs", check.Inputs{Probe: &check.ProbeReport{Size: 1 << 20, Pairs: []check.ProbePair{
			{Src: 0, Dst: 1, PeerAccess: true, Verified: true, HostVerified: true, Mismatch: -1, BytesPerSecond: 1e10},
			{Src: 1, Dst: 0, PeerAccess: true, Verified: true, HostVerified: true, Mismatch: -1, BytesPerSecond: 1e10}}}}, false, check.Skip, ""},
		{"H200 VM capture, NVML", "h200-2gpu-vm", check.Inputs{}, true, check.Pass, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := loadMachine(t, tt.machine)
			if tt.nvml {
				n.GPU = h200VMFacts(t)
			}
			f := check.NewFacts(n, tt.in)
			res, err := check.Run(f, nil)
			if err != nil {
				t.Fatal(err)
			}
			req := []check.Capability{check.CapP2P}
			judged := check.Judge(res, req)
			var r check.Result
			for _, c := range judged {
				if c.ID == "nvml_p2p_status" {
					r = c
				}
			}
			if r.Status != tt.want {
				t.Errorf("nvml_p2p_status = %s (%s), want %s", r.Status, r.Summary, tt.want)
			}
			if tt.want == check.Unknown && (!slices.Equal(r.Blocks, req) || len(r.Remediation) == 0 || !strings.Contains(r.Summary, "depends on the hypervisor")) {
				t.Errorf("unknown in a VM: blocks %v, summary %q, remediation %q", r.Blocks, r.Summary, r.Remediation)
			}
			if o := check.Overall(judged, req); tt.overall != "" && o != tt.overall {
				t.Errorf("overall under --require p2p = %s, want %s", o, tt.overall)
			}
		})
	}
}

// h200VMFacts are the NVML facts recorded on the 2-GPU H200 VM, as a snapshot
// taken there keeps them (p2pkit/nvml.json).
func h200VMFacts(t *testing.T) *gpu.Facts {
	t.Helper()
	b, err := os.ReadFile("../gpu/testdata/h200-2gpu-vm/facts.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var f gpu.Facts
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return &f
}
