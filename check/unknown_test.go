package check_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/procfs"
)

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

// TestBAR1Unread: a resource line that did not parse makes BAR1 unknown, never
// "no address assigned" (issue 10, item 3).
func TestBAR1Unread(t *testing.T) {
	gpu1 := addr("0000:04:00.0")
	for _, tt := range []struct {
		name   string
		change func(r *pcie.Record)
		want   check.Status
		msg    string
	}{
		{"every BAR line after BAR0 unread", func(r *pcie.Record) {
			r.Resources, r.ResourcesUnread = r.Resources[:1], []int{1, 2, 3}
		}, check.Unknown, "resource line(s) 1, 2, 3 did not parse"},
		{"the line before the BAR1 found unread", func(r *pcie.Record) {
			r.Resources, r.ResourcesUnread = slices.Delete(slices.Clone(r.Resources), 1, 2), []int{1}
		}, check.Unknown, "resource line(s) 1 did not parse"},
		{"a line after BAR1 unread", func(r *pcie.Record) { r.ResourcesUnread = []int{6} }, check.Pass, ""},
		{"no resource file", func(r *pcie.Record) { r.Resources = nil }, check.Unknown, "the resource file was not read"},
		{"BAR1 really unassigned", func(r *pcie.Record) { r.Resources = r.Resources[:1] }, check.Fail, "no address assigned"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := withRecords(loadMachine(t, "degraded-link"), func(r *pcie.Record) {
				if r.Address == gpu1 {
					tt.change(r)
				}
			})
			r := run1(t, check.NewFacts(n, check.Inputs{}), "bar_sizes")
			if r.Status != tt.want {
				t.Fatalf("bar_sizes = %s %q, want %s", r.Status, r.Summary, tt.want)
			}
			if tt.msg != "" && !slices.ContainsFunc(r.Findings, func(f check.Finding) bool { return strings.Contains(f.Message, tt.msg) }) {
				t.Errorf("findings %+v lack %q", r.Findings, tt.msg)
			}
			if r.Status == check.Unknown && (len(r.Remediation) == 0 || !strings.Contains(r.Remediation[0], "resource")) {
				t.Errorf("remediation %q does not say which file to read", r.Remediation)
			}
		})
	}
}

// TestUnknownExitsThree: without root the DGX's ACS is unknown: the report exits 3
// and its fix-first line says to run as root.
func TestUnknownExitsThree(t *testing.T) {
	r := report(t, "dgx-h100-nonroot")
	if r.Overall != check.Unknown || r.ExitCode != check.ExitNoEval {
		t.Errorf("overall %s exit %d, want unknown, 3", r.Overall, r.ExitCode)
	}
	if ff := r.FixFirst; ff == nil || ff.ID != "acs_path" || !strings.Contains(ff.Remediation, "run p2pcheck as root (CAP_SYS_ADMIN) to read ACS Control past config space offset 64") {
		t.Errorf("fix first = %+v, want acs_path and how to read it", r.FixFirst)
	}
	if r.Features.Ready != "false" || r.Features.P2P != "false" {
		t.Errorf("ready %s, p2p %s; want false while ACS is unknown", r.Features.Ready, r.Features.P2P)
	}
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

// TestResizeNamesTheBARIndex: the resize fix writes resource<index>_resize of the
// GPU's BAR1 (line 1 here, where BAR0 is 32-bit; line 2 on an H100/H200 whose
// BAR0 is 64-bit) with log2 of the size in MiB.
func TestResizeNamesTheBARIndex(t *testing.T) {
	n := loadMachine(t, "dgx-h100")
	r := run1(t, check.NewFacts(n, check.Inputs{}), "bar_sizes")
	if r.Status != check.Pass {
		t.Fatalf("bar_sizes = %s on dgx-h100 whose BAR1 is at its ReBAR maximum", r.Status)
	}
	// Shrink gpu0's current ReBAR size below its maximum: the fix names its BAR.
	g0 := addr("0000:1a:00.0")
	small := withRecords(n, func(r *pcie.Record) {
		if r.Address == g0 {
			r.Config = slices.Clone(r.Config)
		}
	})
	d := small.Topology.Device(g0)
	if d == nil || d.Config == nil || len(d.Config.ReBAR) == 0 {
		t.Skip("gpu0 of dgx-h100 has no decoded ReBAR capability")
	}
	d.Config.ReBAR[0].Current = 64 << 30
	r = run1(t, check.NewFacts(small, check.Inputs{}), "bar_sizes")
	want := "echo 17 > /sys/bus/pci/devices/0000:1a:00.0/resource1_resize"
	if r.Status != check.Warn || !strings.Contains(strings.Join(r.Remediation, " "), want) {
		t.Errorf("bar_sizes = %s %q, want a warning with %q", r.Status, r.Remediation, want)
	}
	// With NVML saying the framebuffer is 64 GiB, BAR1 covers it: no warning.
	fb, total, used := uint64(64<<30), uint64(64<<30), uint64(1<<20)
	small.GPU = &gpu.Facts{GPUs: []gpu.GPU{{Index: 0, Address: &g0, MemoryTotal: &fb, BAR1Total: &total, BAR1Used: &used}}}
	if r := run1(t, check.NewFacts(small, check.Inputs{}), "bar_sizes"); slices.Contains(r.Subjects, g0.String()) {
		t.Errorf("bar_sizes warns on %s whose BAR1 covers the framebuffer: %+v", g0, r.Findings)
	}
}

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

// TestNFDP2PWhenDriverRefuses: the p2p label is false when NVML says the driver
// refuses P2P, though nvml_p2p_status only warns.
func TestNFDP2PWhenDriverRefuses(t *testing.T) {
	cns := gpu.P2PChipsetNotSupported
	n := withGPUFacts(loadMachine(t, "dgx-h100-acs-off"), func(f *gpu.Facts) {})
	f := check.NewFacts(n, check.Inputs{})
	res, _ := check.Run(f, nil)
	if rep := check.NewReport(f, res, testMeta); rep.Features.P2P != "true" {
		t.Fatalf("p2p = %s with the driver allowing P2P, want true", rep.Features.P2P)
	}
	n = withGPUFacts(loadMachine(t, "dgx-h100-acs-off"), func(f *gpu.Facts) { f.Pairs[0].P2P.Read = &cns })
	f = check.NewFacts(n, check.Inputs{})
	res, _ = check.Run(f, nil)
	if rep := check.NewReport(f, res, testMeta); rep.Features.P2P != "false" {
		t.Errorf("p2p = %s with the driver refusing P2P reads, want false", rep.Features.P2P)
	}
}
