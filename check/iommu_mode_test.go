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
	"github.com/p2pkit/p2pkit/sysfs"
)

func TestIOMMURules(t *testing.T) {
	gpusOf := func(n *node.Node) []pcie.Address {
		var out []pcie.Address
		for _, d := range n.Topology.Devices {
			if d.IsGPU() {
				out = append(out, d.Address)
			}
		}
		return out
	}
	for _, tt := range []struct {
		name    string
		machine string
		change  func(*node.Node)
		want    verdict
	}{
		{"no NVML: NVLink unknown", "amd-epyc", func(*node.Node) {},
			verdict{check.Unknown, []check.Capability{check.CapP2P, check.CapGDR}, "whether their peer paths need passthrough is unknown", "see which GPU pairs talk over NVLink first"}},
		// AMD: iommu=pt; amd_iommu= has no "on" (kernel-parameters.txt).
		{"AMD PCIe pairs", "amd-epyc", func(n *node.Node) { n.GPU = nvlinkFacts(gpusOf(n), false) },
			verdict{check.Fail, p2p, "need passthrough", "amd_iommu= has no on value"}},
		// HGX: every GPU pair talks over NVSwitch; the NICs use nvidia-peermem.
		{"HGX NVLink pairs, peermem NICs", "dgx-h100", func(n *node.Node) {
			withIOMMU(n, sysfs.IOMMUDMA)
			n.Platform.NVIDIA = &procfs.NVIDIADriver{Version: "570.133.20", Major: 570}
			n.GPU = nvlinkFacts(gpusOf(n), true)
		}, verdict{check.Fail, gdr, "need passthrough", "add iommu=pt to the kernel command line (keep intel_iommu=on"}},
		// As NVML reports the H200 pair of testdata/h200-2gpu-vm/nvml.json: NVLink P2P status OK.
		{"NVLink P2P status, no NIC", "dgx-h100", func(n *node.Node) {
			withIOMMU(n, sysfs.IOMMUDMA)
			f := nvlinkFacts(gpusOf(n), false)
			ok := gpu.P2POK
			for i := range f.Pairs {
				f.Pairs[i].P2P.NVLink = &ok
			}
			for i := range f.GPUs {
				f.GPUs[i].NVLink = nil
			}
			n.GPU = f
			withoutNICs(n)
		}, verdict{check.Pass, nil, "no peer path needs passthrough", ""}},
		{"HGX NVLink pairs, no NIC", "dgx-h100", func(n *node.Node) {
			withIOMMU(n, sysfs.IOMMUDMA)
			n.GPU = nvlinkFacts(gpusOf(n), true)
			withoutNICs(n)
		}, verdict{check.Pass, nil, "no peer path needs passthrough", ""}},
		{"identity", "amd-epyc", func(n *node.Node) { withIOMMU(n, sysfs.IOMMUIdentity) }, verdict{check.Pass, nil, "passthrough (identity domains)", ""}},
		{"types unknown, iommu=pt", "amd-epyc", func(n *node.Node) {
			withIOMMU(n, sysfs.IOMMUUnknown)
			n.Platform.Cmdline = &procfs.Cmdline{Params: []procfs.Param{{Name: "iommu", Value: "pt", HasValue: true}}}
		}, verdict{check.Pass, nil, "the command line asks for passthrough (iommu=pt)", ""}},
		{"types unknown", "amd-epyc", func(n *node.Node) { withIOMMU(n, sysfs.IOMMUUnknown) },
			verdict{check.Unknown, []check.Capability{check.CapP2P, check.CapGDR}, "since Linux 4.19", "iommu=pt"}},
		{"no IOMMU", "amd-epyc", func(n *node.Node) { n.Platform.IOMMUGroups, n.Platform.IOMMUUnits = nil, nil }, verdict{check.Pass, nil, "no IOMMU active", ""}},
		{"guest", "amd-epyc", func(n *node.Node) {
			cpu := *n.Platform.CPU
			cpu.Flags = append(slices.Clone(cpu.Flags), "hypervisor")
			n.Platform.CPU = &cpu
			n.GPU = nvlinkFacts(gpusOf(n), false)
		}, verdict{check.Warn, nil, "guest IOMMU translates DMA", "iommu=pt"}},
		// Grace: arm64 has no iommu=; the C2C NIC pair is fine over DMA-BUF.
		{"Grace", "grace-gh200", func(*node.Node) {},
			verdict{check.Unknown, []check.Capability{check.CapP2P, check.CapGDR}, "is unknown", "see whether GPUDirect RDMA can use DMA-BUF first"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := loadMachine(t, tt.machine)
			tt.change(n)
			judge(t, tt.want, run1(t, check.NewFacts(n, check.Inputs{}), "iommu_mode"))
		})
	}
}

// TestAMDIOMMUOn: amd-epyc boots with amd_iommu=on, a value the kernel does not
// know; the finding says so.
func TestAMDIOMMUOn(t *testing.T) {
	r := run1(t, check.NewFacts(loadMachine(t, "amd-epyc"), check.Inputs{}), "iommu_mode")
	if !slices.ContainsFunc(r.Findings, func(f check.Finding) bool {
		return f.Subject == "amd_iommu=on" && f.Status == check.Warn && strings.Contains(f.Message, "the kernel ignores it")
	}) {
		t.Errorf("findings %+v lack the amd_iommu=on warning", r.Findings)
	}
	if slices.Contains(r.Subjects, "amd_iommu=on") {
		t.Errorf("subjects %v name the parameter, not only peer paths", r.Subjects)
	}
}
