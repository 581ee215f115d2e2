package check_test

import (
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/kversion"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/procfs"
	"github.com/p2pkit/p2pkit/sysfs"
)

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

func TestGdrdrvRules(t *testing.T) {
	loaded := []procfs.Module{{Name: "nvidia"}, {Name: "gdrdrv"}}
	devs := []procfs.CharDevice{{Major: 195, Name: "nvidia"}, {Major: 235, Name: "gdrdrv"}}
	params := func(flavour string) map[string]string {
		return map[string]string{"Version": "2.5", "Built for NVIDIA driver flavor": flavour}
	}
	for _, tt := range []struct {
		name   string
		change func(p *node.Platform)
		want   verdict
	}{
		{"ready", func(p *node.Platform) {}, verdict{check.Pass, nil, "gdrdrv ready (2.5, opensource)", ""}},
		// A missing gdrdrv blocks GDRCopy only; the fix names each packaging's service.
		{"not loaded", func(p *node.Platform) {
			p.Modules, p.CharDevices, p.GDRDrvNode, p.GDRDrvParams = p.Modules[:1], p.CharDevices[:1], nil, nil
		},
			verdict{check.Fail, gdrcopy, "gdrdrv kernel module is not loaded", "sudo systemctl start gdrdrv (Debian/Ubuntu gdrdrv-dkms), sudo systemctl start gdrcopy (RHEL RPM)"}},
		{"no node", func(p *node.Platform) { p.GDRDrvNode = nil },
			verdict{check.Fail, gdrcopy, "/dev/gdrdrv does not exist", "mknod -m 666 /dev/gdrdrv c 235 0"}},
		{"stale major", func(p *node.Platform) { p.GDRDrvNode = charDev(240, 0o666) },
			verdict{check.Fail, gdrcopy, "stale node", "mknod -m 666 /dev/gdrdrv c 235 0"}},
		{"minor 1", func(p *node.Platform) { n := charDev(235, 0o666); n.Minor = 1; p.GDRDrvNode = n },
			verdict{check.Fail, gdrcopy, "gdrdrv serves minor 0 only", "mknod -m 666 /dev/gdrdrv c 235 0"}},
		{"regular file", func(p *node.Platform) { p.GDRDrvNode = &procfs.DevNode{Mode: 0o666} },
			verdict{check.Fail, gdrcopy, "not a character device", "mknod"}},
		{"SUSE mode", func(p *node.Platform) { p.GDRDrvNode = charDev(235, 0o660) },
			verdict{check.Warn, nil, "mode 0660", "group video"}},
		// GDRCopy's README: a proprietary-flavour gdrdrv works with the open driver.
		{"proprietary flavour, open driver", func(p *node.Platform) { p.GDRDrvParams = params("proprietary") },
			verdict{check.Pass, nil, "works with either", ""}},
		{"proprietary flavour, TDX guest", func(p *node.Platform) {
			p.GDRDrvParams = params("proprietary")
			cpu := *p.CPU
			cpu.Flags = append(slices.Clone(cpu.Flags), "tdx_guest")
			p.CPU = &cpu
		}, verdict{check.Fail, gdrcopy, "Intel TDX guest", "rebuild gdrdrv"}},
		{"open flavour, proprietary driver", func(p *node.Platform) { p.NVIDIA = &procfs.NVIDIADriver{Version: "570.133.20", Major: 570} },
			verdict{check.Warn, nil, "cannot load with it", "rebuild gdrdrv"}},
		{"no params", func(p *node.Platform) { p.GDRDrvParams = nil }, verdict{check.Pass, nil, "older than GDRCopy 2.5", ""}},
		{"unreadable", func(p *node.Platform) { p.Modules, p.CharDevices, p.GDRDrvNode, p.GDRDrvParams = nil, nil, nil, nil },
			verdict{check.Unknown, gdrcopy, "state is unknown", ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := loadMachine(t, "degraded-link")
			n.Platform.Modules, n.Platform.CharDevices = loaded, devs
			n.Platform.GDRDrvNode, n.Platform.GDRDrvParams = charDev(235, 0o666), params("opensource")
			tt.change(&n.Platform)
			judge(t, tt.want, run1(t, check.NewFacts(n, check.Inputs{}), "gdrdrv"))
		})
	}
	for _, tt := range []struct {
		name   string
		access check.Access
		perm   fs.FileMode
		want   verdict
	}{
		{"user denied", check.Access{UID: 1000}, 0o660, verdict{check.Warn, nil, "the running user (uid 1000) cannot open it", "chmod 666"}},
		{"user allowed by group", check.Access{UID: 1000, ReadWrite: true}, 0o660, verdict{check.Warn, nil, "only its owner and group", "chmod 666"}},
		{"user allowed", check.Access{UID: 1000, ReadWrite: true}, 0o666, verdict{check.Pass, nil, "gdrdrv ready", ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := loadMachine(t, "degraded-link")
			n.Platform.Modules, n.Platform.CharDevices = loaded, devs
			n.Platform.GDRDrvNode, n.Platform.GDRDrvParams = charDev(235, tt.perm), params("opensource")
			judge(t, tt.want, run1(t, check.NewFacts(n, check.Inputs{Source: check.Live, GDRDrvAccess: &tt.access}), "gdrdrv"))
		})
	}
	t.Run("no NVIDIA GPU", func(t *testing.T) {
		judge(t, verdict{check.Skip, nil, "no NVIDIA GPU", ""}, run1(t, check.NewFacts(loadMachine(t, "sriov-nic"), check.Inputs{}), "gdrdrv"))
	})
}

// TestH200GdrdrvBlocksGDRCopy: on the H200 capture a missing gdrdrv blocks gdrcopy
// only, so with the default requirements (p2p, gdr) it warns instead of failing.
func TestH200GdrdrvBlocksGDRCopy(t *testing.T) {
	r := result(t, report(t, "h200-2gpu-vm"), "gdrdrv")
	judge(t, verdict{check.Warn, gdrcopy, "gdrdrv kernel module is not loaded", "systemctl start gdrdrv"}, r)
	if !slices.ContainsFunc(r.Remediation, func(s string) bool { return strings.Contains(s, "gdrcopy.enabled=true") }) {
		t.Errorf("remediation lacks the GPU Operator's Helm value: %q", r.Remediation)
	}
}

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
			verdict{check.Unknown, []check.Capability{check.CapP2P, check.CapGDR}, "whether their peer paths need passthrough is unknown", "iommu=pt"}},
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
			verdict{check.Unknown, []check.Capability{check.CapP2P, check.CapGDR}, "is unknown", "iommu.passthrough=1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := loadMachine(t, tt.machine)
			tt.change(n)
			judge(t, tt.want, run1(t, check.NewFacts(n, check.Inputs{}), "iommu_mode"))
		})
	}
}

func TestGPUDirectRDMARules(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(*node.Platform)
		want   verdict
	}{
		// DMA-BUF needs the NIC's rdma-core support, which cannot be read: never a pass.
		{"dmabuf only", func(*node.Platform) {}, verdict{check.Unknown, gdr, "possible but unconfirmed", "NCCL_DEBUG=INFO"}},
		{"proprietary, no peermem", func(p *node.Platform) { p.NVIDIA = &procfs.NVIDIADriver{Version: "535.1", Major: 535} },
			verdict{check.Fail, gdr, "proprietary NVIDIA modules do not export DMA-BUF", "NCCL 2.13+ then uses DMA-BUF by default (NCCL_DMABUF_ENABLE defaults to 1)"}},
		{"old kernel, peermem", func(p *node.Platform) {
			p.Kernel = &kversion.Version{Release: "5.4.0", Major: 5, Minor: 4}
			p.MemoryPeers = map[string]string{"nv_mem": "1.0"}
		}, verdict{check.Pass, nil, "through peermem", ""}},
		{"both peer clients", func(p *node.Platform) {
			p.Modules = append(slices.Clone(p.Modules), procfs.Module{Name: "nvidia_peermem"}, procfs.Module{Name: "nv_peer_mem"})
		}, verdict{check.Warn, nil, "both nvidia_peermem and nv_peer_mem", "rmmod nv_peer_mem"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := loadMachine(t, "amd-epyc")
			tt.change(&n.Platform)
			judge(t, tt.want, run1(t, check.NewFacts(n, check.Inputs{}), "gpudirect_rdma"))
		})
	}
	t.Run("pre-Turing GPU", func(t *testing.T) {
		n := loadMachine(t, "amd-epyc")
		devs := slices.Clone(n.Topology.Devices)
		for i, d := range devs {
			if d.IsGPU() {
				c := *d
				c.Device = 0x1db1 // GV100 (Volta)
				devs[i] = &c
			}
		}
		n.Topology = &pcie.Topology{Devices: devs}
		r := run1(t, check.NewFacts(n, check.Inputs{}), "gpudirect_rdma")
		judge(t, verdict{check.Fail, gdr, "older than Turing", "open NVIDIA kernel modules"}, r)
	})
}

func TestKernelP2PDMARules(t *testing.T) {
	r := run1(t, check.NewFacts(loadMachine(t, "amd-epyc"), check.Inputs{}), "kernel_p2pdma")
	judge(t, verdict{check.Pass, nil, "built with CONFIG_PCI_P2PDMA", ""}, r)
	n := loadMachine(t, "amd-epyc")
	n.Platform.KernelConfig = procfs.KernelConfig{Source: "/boot/config-6.1.0-28-amd64", Options: map[string]string{"CONFIG_PCI_P2PDMA": "n"}}
	judge(t, verdict{check.Fail, nvmeP2P, "without CONFIG_PCI_P2PDMA", "Debian's 6.1 and 6.12 do not"}, run1(t, check.NewFacts(n, check.Inputs{}), "kernel_p2pdma"))
	n.Platform.KernelConfig = procfs.KernelConfig{}
	judge(t, verdict{check.Unknown, nvmeP2P, "kernel configuration not found", ""}, run1(t, check.NewFacts(n, check.Inputs{}), "kernel_p2pdma"))
}

func TestNVMLRulesBlock(t *testing.T) {
	cns := gpu.P2PChipsetNotSupported
	for _, tt := range []struct {
		name   string
		id     string
		change func(*gpu.Facts)
		want   verdict
	}{
		{"cc on", "confidential_computing", func(f *gpu.Facts) { f.ConfCompute.Enabled = true },
			verdict{check.Fail, []check.Capability{check.CapP2P, check.CapGDR, check.CapGDRCopy}, "confidential computing is on", "--set-cc-mode=off"}},
		{"cc unknown", "confidential_computing", func(f *gpu.Facts) { f.ConfCompute = nil },
			verdict{check.Unknown, []check.Capability{check.CapP2P, check.CapGDR, check.CapGDRCopy}, "did not report", ""}},
		{"p2p cns", "nvml_p2p_status", func(f *gpu.Facts) { f.Pairs[1].P2P.Read = &cns },
			verdict{check.Fail, p2p, "refuses P2P for 1 ordered pair", "acs_path"}},
		{"p2p unknown", "nvml_p2p_status", func(f *gpu.Facts) { f.Pairs[1].P2P.Read = nil },
			verdict{check.Unknown, p2p, "did not report P2P status for 1 of 2", ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := withGPUFacts(loadMachine(t, "degraded-link"), tt.change)
			judge(t, tt.want, run1(t, check.NewFacts(n, check.Inputs{}), tt.id))
		})
	}
}

// wrongAdvice are texts issue #17 found wrong against their primary sources; no
// report on any machine may print them again.
var wrongAdvice = []string{
	"systemctl start gdrcopy (packaged service)",
	"must be built for the open flavour",
	"must be built for the proprietary flavour; GPUDirect",
	"GDRCOPY_ENABLED",
	"NCCL 2.19+",
	"(with amd_iommu=on",
	"Linux 5.11+,",
	"older than 5.11",
	"most distribution kernels",
	"field-checks.md",
}

// platformChecks are the checks of platform.go, gpu.go and process.go.
var platformChecks = []string{"virtualization", "confidential_computing", "iommu_mode", "nvidia_driver", "nvml_p2p_status",
	"kernel_p2pdma", "gpudirect_rdma", "gdrdrv", "memlock_limit", "nccl_env", "p2p_data_integrity"}

// TestNoWrongAdvice renders the platform checks of every machine and looks for
// the wrong texts.
func TestNoWrongAdvice(t *testing.T) {
	for _, name := range machines() {
		t.Run(name, func(t *testing.T) {
			for _, r := range report(t, name).Checks {
				if !slices.Contains(platformChecks, r.ID) {
					continue
				}
				b := string(marshal(t, r))
				for _, w := range wrongAdvice {
					if strings.Contains(b, w) {
						t.Errorf("%s contains %q", r.ID, w)
					}
				}
			}
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

// withoutNICs drops n's NICs on a copy of its topology: loadMachine's nodes share
// their Topology with the cache.
func withoutNICs(n *node.Node) {
	t := *n.Topology
	t.Devices = slices.DeleteFunc(slices.Clone(t.Devices), (*pcie.Device).IsNIC)
	n.Topology = &t
}
