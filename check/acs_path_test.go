package check_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
)

// TestDGXACS: ACS on the PEX downstream ports fails acs_path, naming those
// bridges, with the kernel parameter in the form `p2pcheck fix` writes for the
// node's kernel (6.8: pci=disable_acs_redir= in the path form) and a setpci for each.
func TestDGXACS(t *testing.T) {
	r := report(t, "dgx-h100")
	c := result(t, r, "acs_path")
	// One of each switch level below root bus 15: level 0 (17:xx) and level 1 (19:xx).
	for _, bdf := range []string{"0000:17:00.0", "0000:17:02.0", "0000:19:00.0", "0000:19:01.0"} {
		if !slices.Contains(c.Subjects, bdf) {
			t.Errorf("acs_path subjects lack PEX downstream port %s: %v", bdf, c.Subjects)
		}
	}
	// The root ports also have ACS, but no pair shares one as a common bridge.
	if slices.Contains(c.Subjects, "0000:15:01.0") {
		t.Errorf("acs_path names root port 0000:15:01.0, which the kernel does not test for these pairs")
	}
	if len(c.Remediation) < 2 || !strings.HasPrefix(c.Remediation[0], `kernel command line: "pci=disable_acs_redir=0000:15:01.0/0.0/0.0;`) ||
		!strings.Contains(c.Remediation[1], "setpci -s $b ECAP_ACS+6.w=0000:002c") {
		t.Errorf("acs_path remediation = %q, want the kernel parameter then the setpci loop", c.Remediation)
	}
	for _, f := range c.Findings {
		if !strings.Contains(f.Message, "fix: setpci -s "+f.Subject+" ECAP_ACS+6.w=0000:002c") {
			t.Errorf("finding for %s has no setpci of its own: %s", f.Subject, f.Message)
		}
	}
	if r.FixFirst == nil || r.FixFirst.ID != "acs_path" {
		t.Errorf("fix first = %+v, want acs_path", r.FixFirst)
	}
}

// TestACSInVM: in a VM the guest's ACS redirect neither fails nor gets a setpci.
func TestACSInVM(t *testing.T) {
	n := loadMachine(t, "dgx-h100")
	cpu := *n.Platform.CPU
	cpu.Flags = append(slices.Clone(cpu.Flags), "hypervisor")
	n.Platform.CPU = &cpu
	r := run1(t, check.NewFacts(n, check.Inputs{}), "acs_path")
	if r.Status != check.Skip || len(r.Remediation) != 0 || !strings.Contains(r.Summary, "ACS enabled on the host and ATS on the NICs") {
		t.Errorf("acs_path in a VM = %s %q %q, want a skip that gives NCCL's VM advice and no setpci", r.Status, r.Summary, r.Remediation)
	}
	if !strings.Contains(r.Observed, "0000:17:00.0") {
		t.Errorf("observed %q does not list the guest bridges with redirect", r.Observed)
	}
}

// TestACSBlocks: the DGX's ACS redirect blocks GPU peer-to-peer, GPUDirect RDMA
// and the NVMe pairs.
func TestACSBlocks(t *testing.T) {
	r := result(t, report(t, "dgx-h100"), "acs_path")
	if want := []check.Capability{check.CapP2P, check.CapGDR, check.CapNVMeP2P}; !slices.Equal(r.Blocks, want) {
		t.Errorf("acs_path blocks %v, want %v", r.Blocks, want)
	}
}

// TestACSNVLink: on the DGX with NVML's NVLink facts (every GPU on NVSwitch) no
// GPU pair is failed by acs_path, since ACS acts on PCIe TLPs only; the GPU-NIC
// (gdr) and NVMe pairs still are. Without the NICs and NVMe nothing is left to fail.
func TestACSNVLink(t *testing.T) {
	gpus := func(n *node.Node) []pcie.Address {
		var out []pcie.Address
		for _, d := range n.Topology.Devices {
			if d.IsGPU() {
				out = append(out, d.Address)
			}
		}
		return out
	}
	n := loadMachine(t, "dgx-h100")
	n.GPU = nvlinkFacts(gpus(n), true)
	r := run1(t, check.NewFacts(n, check.Inputs{}), "acs_path")
	if r.Status != check.Fail || slices.Contains(r.Blocks, check.CapP2P) || !slices.Contains(r.Blocks, check.CapGDR) {
		t.Errorf("acs_path with NVLink = %s blocking %v, want a fail that blocks gdr, not p2p", r.Status, r.Blocks)
	}
	isGPU := map[string]bool{}
	for _, a := range gpus(n) {
		isGPU[a.String()] = true
	}
	for _, f := range r.Findings {
		_, eg, found := strings.Cut(f.Message, "e.g. ")
		if !found {
			continue
		}
		first, _, _ := strings.Cut(eg, ";")
		if a, b, ok := strings.Cut(first, "<->"); ok && isGPU[a] && isGPU[b] {
			t.Errorf("finding %s names a GPU pair as what the bridge redirects: %s", f.Subject, f.Message)
		}
	}
	if !slices.ContainsFunc(r.Findings, func(f check.Finding) bool {
		return f.Status == check.Pass && strings.Contains(f.Message, "ACS acts on PCIe TLPs only")
	}) {
		t.Errorf("no finding says why the NVLink pairs are not judged: %+v", r.Findings)
	}

	n = loadMachine(t, "dgx-h100")
	n.GPU = nvlinkFacts(gpus(n), true)
	withoutNICs(n)
	n.Topology.Devices = slices.DeleteFunc(n.Topology.Devices, (*pcie.Device).IsNVMe)
	r = run1(t, check.NewFacts(n, check.Inputs{}), "acs_path")
	if r.Status != check.Pass || !strings.Contains(r.Observed, "only on the PCIe paths of GPU pairs that talk over NVLink") {
		t.Errorf("acs_path, NVLink GPUs only = %s %q %q, want a pass that says the redirect is on NVLink pairs' PCIe paths", r.Status, r.Summary, r.Observed)
	}
}
