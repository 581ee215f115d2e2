package check_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/procfs"
)

// TestGraceC2C: on a Grace superchip a NIC on the GPU's CPU (PHB) is within
// NCCL's reach (P2C, NCCL 2.27+); the farther GPUs still warn.
func TestGraceC2C(t *testing.T) {
	n := withRecords(loadMachine(t, "amd-epyc"), func(r *pcie.Record) {
		if r.Vendor == 0x10de {
			r.Device = 0x2342 // GH200
		}
	})
	n.Platform.CPU = &procfs.CPUInfo{Flags: []string{"fp", "asimd", "aes"}, CPUs: 72}
	r := run1(t, check.NewFacts(n, check.Inputs{}), "gpu_nic_affinity")
	if r.Status != check.Warn || slices.Contains(r.Subjects, "0000:01:00.0") || !slices.Contains(r.Subjects, "0000:81:00.0") {
		t.Errorf("gpu_nic_affinity = %s on %v, want the SYS GPUs only", r.Status, r.Subjects)
	}
	if !slices.ContainsFunc(r.Findings, func(f check.Finding) bool { return f.Subject == "0000:01:00.0" && strings.Contains(f.Message, "P2C") }) {
		t.Errorf("findings %+v do not explain P2C for 0000:01:00.0", r.Findings)
	}
}

// TestPXN: a GPU whose NICs are all farther than PXB reaches a NIC below an
// NVLink-connected GPU's switch through it (PXN); without NVML that is unknown and
// the warning says so.
func TestPXN(t *testing.T) {
	nic0 := addr("0000:1b:00.0")
	n := withRecords(loadMachine(t, "dgx-h100"), func(r *pcie.Record) {
		if r.Class>>8 == 0x0207 && r.Address != nic0 {
			// Only nic0 stays an RDMA NIC; the class is read from config when present.
			r.Class, r.RDMADevs, r.Config = 0x020000, nil, nil
		}
	})
	far := "0000:9f:00.0" // a GPU of the other socket
	r := run1(t, check.NewFacts(n, check.Inputs{}), "gpu_nic_affinity")
	if !slices.ContainsFunc(r.Findings, func(f check.Finding) bool {
		return f.Subject == far && f.Status == check.Warn && strings.Contains(f.Message, "NVLink is unknown without NVML")
	}) {
		t.Fatalf("without NVML: %s %q findings %+v, want a warning on %s that mentions PXN", r.Status, r.Summary, r.Findings, far)
	}
	g0, gf := addr("0000:1a:00.0"), addr(far)
	n.GPU = &gpu.Facts{GPUs: []gpu.GPU{
		{Index: 0, Address: &g0, NVLink: &gpu.NVLink{Active: 1, Links: []gpu.NVLinkPeer{{Link: 0, Remote: &gf, RemoteType: "gpu"}}}},
		{Index: 1, Address: &gf, NVLink: &gpu.NVLink{Active: 1, Links: []gpu.NVLinkPeer{{Link: 0, Remote: &g0, RemoteType: "gpu"}}}},
	}}
	r = run1(t, check.NewFacts(n, check.Inputs{}), "gpu_nic_affinity")
	if slices.Contains(r.Subjects, far) {
		t.Errorf("with NVLink to gpu0: %s still warns: %+v", far, r.Findings)
	}
}

// TestGraceFixtureAfterMerge: on the GH200 machine of the platform checks
// ("grace-gh200", internal/testtools/fixture/machines_advice.go) the NIC on the Grace CPU is
// within NCCL's GPUDirect RDMA reach (P2C). It skips until that machine exists.
func TestGraceFixtureAfterMerge(t *testing.T) {
	if !slices.Contains(fixture.Names(), "grace-gh200") {
		t.Skip("no grace-gh200 machine yet: it comes with the platform checks' fixtures")
	}
	c := result(t, report(t, "grace-gh200"), "gpu_nic_affinity")
	if c.Status != check.Pass || !slices.ContainsFunc(c.Findings, func(f check.Finding) bool { return strings.Contains(f.Message, "P2C") }) {
		t.Errorf("gpu_nic_affinity = %s %+v, want a pass that explains P2C", c.Status, c.Findings)
	}
}
