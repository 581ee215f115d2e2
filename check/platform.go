package check

import (
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/internal/bytesize"
	"github.com/p2pkit/p2pkit/internal/gdrready"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/procfs"
	"github.com/p2pkit/p2pkit/sysfs"
)

// checkDoc is the user documentation page of a check, which every result's Refs
// name first.
func checkDoc(id string) string { return "docs/checks/" + id + ".md" }

// Public sources the platform checks cite.
const (
	urlKernelParams  = "https://docs.kernel.org/admin-guide/kernel-parameters.html"
	urlIOMMUGroupABI = "https://docs.kernel.org/admin-guide/abi-testing.html#abi-sys-kernel-iommu-groups-grp-id-type"
	urlGPUDirectRDMA = "https://docs.nvidia.com/cuda/gpudirect-rdma/"
	urlNCCLTrouble   = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"
	urlNCCLEnv       = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
	urlGDRCopy       = "https://github.com/NVIDIA/gdrcopy"
	urlOpenModules   = "https://github.com/NVIDIA/open-gpu-kernel-modules"
)

// checkVirtualization reports whether the kernel runs under a hypervisor, from
// the x86 "hypervisor" CPU flag (CPUID.1:ECX[31], printed by show_cpuinfo in
// arch/x86/kernel/cpu/proc.c). It is informational: in a VM the PCIe tree, link
// widths, ACS and NUMA nodes the guest sees are the hypervisor's virtual
// topology, so the link, NUMA and path-class checks say so, and GPU P2P depends
// on the hypervisor (NCCL's troubleshooting guide: the host keeps ACS on for
// isolation and P2P needs ATS on the devices).
func checkVirtualization(f *Facts) Result {
	r := Result{Refs: []string{checkDoc("virtualization"), "linux arch/x86/kernel/cpu/proc.c show_cpuinfo", urlNCCLTrouble}}
	cpu := f.Node.Platform.CPU
	if cpu == nil {
		r.Status, r.Summary = Skip, "/proc/cpuinfo unreadable: cannot tell bare metal from a VM"
		return r
	}
	if cpu.Hypervisor() {
		r.Status = Pass
		r.Observed = "virtual machine"
		r.Summary = "virtual machine (hypervisor CPU flag): pcie_link, numa_node, gpu_nic_affinity and acs_path describe the virtual topology"
		r.Evidence = []Evidence{{Source: "/proc/cpuinfo flags", Value: "hypervisor"}}
		return r
	}
	if cpu.VendorID == "" {
		r.Status, r.Summary = Skip, "not an x86 CPU: /proc/cpuinfo has no hypervisor flag to tell a VM by"
		return r
	}
	r.Status = Pass
	r.Observed = "bare metal"
	r.Summary = "bare metal (no hypervisor CPU flag)"
	r.Evidence = []Evidence{{Source: "/proc/cpuinfo flags", Value: "no hypervisor flag"}}
	return r
}

// IOMMU command-line options checkIOMMU reports, as Documentation/admin-guide/
// kernel-parameters.txt spells them.
var iommuOptions = []string{"iommu", "intel_iommu", "amd_iommu", "iommu.passthrough", "iommu.strict"}

// checkIOMMU reports how the IOMMU treats DMA and whether that matters for the
// node's peer paths. The group types come from /sys/kernel/iommu_groups/*/type
// (iommu_group_show_type in drivers/iommu/iommu.c; readable since Linux 4.19,
// writable since 5.11), the hardware units from /sys/class/iommu and the options
// from /proc/cmdline.
//
// Translation (DMA, DMA-FQ) matters per path, not per node:
//   - GPU pairs over NVLink (HGX, NVL, GH200) never cross the IOMMU;
//   - GPU pairs over PCIe: NVIDIA's P2P over a translating IOMMU on bare metal is
//     unsupported (wrong data or hangs), so it blocks p2p;
//   - GPU-NIC pairs (GPUDirect RDMA): nvidia-peermem needs 1:1 addresses, "they
//     must be disabled or configured for pass-through" (NVIDIA's GPUDirect RDMA
//     guide, "IOMMUs"), while DMA-BUF imports map the peer through the IOMMU
//     (dma_buf_map_attachment), so it blocks gdr only where DMA-BUF is not possible;
//   - NVMe and p2pmem pairs go through the kernel's P2PDMA, which maps through the
//     IOMMU where it must (pci_p2pdma_map_segment in drivers/pci/p2pdma.c).
//
// Without NVML the NVLink facts are missing, so translated GPU pairs are unknown,
// never a failure. In a VM the guest IOMMU only warns: the host decides.
func checkIOMMU(f *Facts) Result {
	p := f.Node.Platform
	r := Result{Refs: []string{checkDoc("iommu_mode"), "linux drivers/iommu/iommu.c iommu_group_show_type", urlIOMMUGroupABI, urlKernelParams, urlGPUDirectRDMA, urlNCCLTrouble}}
	var opts []string
	if p.Cmdline != nil {
		for _, name := range iommuOptions {
			if v, ok := p.Cmdline.Lookup(name); ok {
				opts = append(opts, name+"="+v)
			}
		}
		r.Evidence = append(r.Evidence, Evidence{Source: "/proc/cmdline", Value: strings.Join(opts, " ")})
	}
	if p.IOMMUUnits != nil {
		r.Evidence = append(r.Evidence, Evidence{Source: "/sys/class/iommu", Value: strings.Join(p.IOMMUUnits, " ")})
	}
	if slices.Contains(opts, "amd_iommu=on") {
		r.Findings = append(r.Findings, Finding{Subject: "amd_iommu=on", Status: Warn,
			Message: "amd_iommu= has no on value (Documentation/admin-guide/kernel-parameters.txt): the kernel ignores it; AMD-Vi is on by default"})
	}
	if len(p.IOMMUGroups) == 0 {
		r.Status = Pass
		r.Observed = "off"
		r.Summary = "no IOMMU active (no IOMMU groups): DMA addresses are physical"
		if len(p.IOMMUUnits) > 0 {
			r.Summary = "IOMMU units present (" + strings.Join(p.IOMMUUnits, ", ") + ") but no groups: DMA is not translated"
		}
		r.Evidence = append(r.Evidence, Evidence{Source: "/sys/kernel/iommu_groups", Value: "absent or empty"})
		return r
	}
	types := map[int]sysfs.IOMMUDomainType{}
	for _, g := range p.IOMMUGroups {
		types[g.ID] = g.Type
	}
	counts := map[sysfs.IOMMUDomainType]int{}
	translated := map[pcie.Address]bool{}
	for _, d := range f.devices {
		if d.IOMMUGroup == nil {
			continue
		}
		t := types[*d.IOMMUGroup]
		counts[t]++
		if t.Translated() {
			translated[d.Address] = true
		}
	}
	var seen []string
	for _, t := range []sysfs.IOMMUDomainType{sysfs.IOMMUIdentity, sysfs.IOMMUDMA, sysfs.IOMMUDMAFQ, sysfs.IOMMUUnmanaged, sysfs.IOMMUBlocked, sysfs.IOMMUUnknown} {
		if counts[t] > 0 {
			seen = append(seen, fmt.Sprintf("%d %s", counts[t], t))
		}
	}
	r.Observed = "groups of devices of interest: " + strings.Join(seen, ", ")
	r.Evidence = append(r.Evidence, Evidence{Source: "/sys/kernel/iommu_groups/*/type", Value: strings.Join(seen, ", ")})
	r.Expected = "identity (passthrough) or no IOMMU where a peer path needs it"
	passthrough := slices.Contains(opts, "iommu=pt") || slices.ContainsFunc(opts, func(o string) bool {
		v, ok := strings.CutPrefix(o, "iommu.passthrough=")
		return ok && kernelBool(v)
	})
	switch {
	case len(translated) > 0:
		f.judgeTranslation(&r, translated)
	case counts[sysfs.IOMMUIdentity] > 0 && counts[sysfs.IOMMUUnknown] == 0:
		r.Status = Pass
		r.Summary = "IOMMU in passthrough (identity domains)"
	case passthrough:
		r.Status = Pass
		r.Summary = "IOMMU group types unreadable; the command line asks for passthrough (" + strings.Join(opts, " ") + ")"
	default:
		r.Status = Unknown
		r.Blocks = []Capability{CapP2P, CapGDR}
		r.Summary = "IOMMU active but its domain types are unreadable (/sys/kernel/iommu_groups/*/type exists since Linux 4.19) and the command line does not ask for passthrough"
		r.Remediation = []string{"look for the default domain type in the kernel log (dmesg | grep -i -e DMAR -e AMD-Vi -e iommu); if it is translated: " + passthroughParam(f)}
	}
	return r
}

// kernelBool reports a true value as the kernel's kstrtobool reads it (lib/kstrtox.c):
// 1, y, Y, on.
func kernelBool(v string) bool {
	switch strings.ToLower(v) {
	case "1", "y", "yes", "on":
		return true
	}
	return false
}

// judgeTranslation fills r for an IOMMU that translates DMA for the devices in
// translated, pair by pair (see checkIOMMU).
func (f *Facts) judgeTranslation(r *Result, translated map[pcie.Address]bool) {
	dmabuf := f.dmabuf()
	var blocks []Capability
	unknown := false
	affected, onPath := 0, 0
	var lines pairLines
	for pr := range f.pairs() {
		if !translated[pr.a.Address] && !translated[pr.b.Address] {
			continue
		}
		onPath++
		gpuA, gpuB := pr.a.IsGPU(), pr.b.IsGPU()
		switch {
		case gpuA && gpuB:
			switch nv := f.nvlinkPair(pr.a.Address, pr.b.Address); {
			case nv == nil:
				unknown = true
				lines.finding(pr, Unknown, "GPU pair behind a translating IOMMU: without NVML it is unknown whether it talks over NVLink (unaffected) or PCIe (unsupported)")
				lines.subject(pr)
			case *nv:
				lines.finding(pr, Pass, "GPU pair talks over NVLink: the IOMMU is not on its path")
			default:
				affected++
				blocks = appendCap(blocks, CapP2P)
				lines.finding(pr, Fail, "GPU pair talks over PCIe through a translating IOMMU: unsupported on bare metal")
				lines.subject(pr)
			}
		case (gpuA && isRDMANIC(pr.b)) || (gpuB && isRDMANIC(pr.a)):
			switch dmabuf.state {
			case Pass:
				lines.finding(pr, Pass, "GPUDirect RDMA over DMA-BUF maps the GPU through the IOMMU: unaffected")
			case Fail:
				affected++
				blocks = appendCap(blocks, CapGDR)
				lines.finding(pr, Fail, "GPUDirect RDMA through nvidia-peermem needs 1:1 addresses (", dmabuf.why, ")")
				lines.subject(pr)
			default:
				unknown = true
				lines.finding(pr, Unknown, "GPUDirect RDMA: unaffected over DMA-BUF, broken through nvidia-peermem; whether DMA-BUF is possible is unknown (", dmabuf.why, ")")
				lines.subject(pr)
			}
		default:
			lines.finding(pr, Pass, "kernel P2PDMA maps through the IOMMU where it must")
		}
	}
	lines.listFindings(r)
	n := len(translated)
	switch {
	case onPath == 0:
		r.Status = Pass
		r.Summary = fmt.Sprintf("IOMMU translates DMA for %d device(s), but no GPU, NIC or NVMe peer pair is among them", n)
		return
	case (affected > 0 || unknown) && f.Hypervisor():
		r.Status = Warn
		r.Summary = fmt.Sprintf("guest IOMMU translates DMA for %d device(s) on peer paths: P2P needs the hypervisor's support", n)
	case affected > 0:
		r.Status = Fail
		r.Blocks = blocks
		r.Summary = fmt.Sprintf("IOMMU translates DMA on %d peer path(s) that need passthrough (%d device(s) of interest translated)", affected, n)
	case unknown:
		r.Status = Unknown
		r.Blocks = []Capability{CapP2P, CapGDR}
		r.Summary = fmt.Sprintf("IOMMU translates DMA for %d device(s) of interest; whether their peer paths need passthrough is unknown", n)
	default:
		r.Status = Pass
		r.Summary = fmt.Sprintf("IOMMU translates DMA for %d device(s), but no peer path needs passthrough (NVLink, DMA-BUF or kernel P2PDMA)", n)
		return
	}
	r.Subjects = append(r.Subjects, lines.subjects...)
	r.Remediation = []string{
		passthroughParam(f) + ", then reboot",
		"or, per IOMMU group on Linux 5.11+ with the device's driver unbound: echo identity > /sys/kernel/iommu_groups/<group>/type",
	}
}

// passthroughParam is the boot parameter that makes the default domains identity
// on this machine (Documentation/admin-guide/kernel-parameters.txt): iommu=pt is
// x86-only; iommu.passthrough=1 works on arm64 and x86. amd_iommu= has no "on"
// (AMD-Vi is on by default) and intel_iommu=on only enables VT-d.
func passthroughParam(f *Facts) string {
	c := f.Node.Platform.CPU
	switch {
	case f.Arm64():
		return "add iommu.passthrough=1 to the kernel command line (arm64: iommu= is an x86 parameter)"
	case c != nil && (c.VendorID == "AuthenticAMD" || c.VendorID == "HygonGenuine"):
		return "add iommu=pt to the kernel command line (AMD-Vi stays on for interrupt remapping and VFIO; amd_iommu= has no on value)"
	case c != nil && c.VendorID == "GenuineIntel":
		return "add iommu=pt to the kernel command line (keep intel_iommu=on where VT-d must stay on for VFIO)"
	}
	return "add iommu.passthrough=1 (arm64 and x86) or iommu=pt (x86 only) to the kernel command line"
}

func appendCap(cs []Capability, c Capability) []Capability {
	if slices.Contains(cs, c) {
		return cs
	}
	return append(cs, c)
}

// nvlinkPair reports whether the GPUs at a and b talk over NVLink, from NVML: the
// driver's NVLink P2P status for the pair (nvmlDeviceGetP2PStatus with
// NVML_P2P_CAPS_INDEX_NVLINK), a link from one to the other, or both having
// links to NVSwitches (HGX, NVL). Nil when NVML's facts do not say.
func (f *Facts) nvlinkPair(a, b pcie.Address) *bool {
	ga, gb := f.nvmlGPU(a), f.nvmlGPU(b)
	if ga == nil || gb == nil {
		return nil
	}
	yes, no := true, false
	for _, p := range f.Node.GPU.Pairs {
		if p.A == ga.Index && p.B == gb.Index && p.P2P.NVLink != nil && *p.P2P.NVLink == gpu.P2POK {
			return &yes
		}
	}
	if linked(ga.NVLink, "gpu", &b) || linked(gb.NVLink, "gpu", &a) ||
		linked(ga.NVLink, "switch", nil) && linked(gb.NVLink, "switch", nil) {
		return &yes
	}
	if ga.NVLink == nil || gb.NVLink == nil {
		return nil
	}
	return &no
}

// linked reports an active NVLink to a device of type typ ("gpu", "switch"), at
// address to when it is not nil.
func linked(l *gpu.NVLink, typ string, to *pcie.Address) bool {
	return l != nil && slices.ContainsFunc(l.Links, func(p gpu.NVLinkPeer) bool {
		return p.RemoteType == typ && (to == nil || p.Remote != nil && *p.Remote == *to)
	})
}

// kernelP2PDMAUsers reports whether some pair of interest has an endpoint that
// moves data through the kernel's P2PDMA: an NVMe controller, an RDMA NIC or a
// p2pmem provider.
func (f *Facts) kernelP2PDMAUsers() bool {
	for i, r := range f.roles {
		if r&(roleNVMe|roleRDMA|roleP2PMem) != 0 && f.partners(i, r.pairsWith) > 0 {
			return true
		}
	}
	return false
}

// checkKernelP2PDMA reports whether the kernel was built with CONFIG_PCI_P2PDMA,
// which kernel peer-to-peer users need (NVMe controller memory buffers, p2pmem,
// RDMA and NVMe-oF target offload through struct pages; drivers/pci/p2pdma.c),
// and lists the p2pmem providers (/sys/bus/pci/devices/*/p2pmem). NVIDIA GPU
// P2P and GPUDirect RDMA do not depend on it, so its absence blocks nvme-p2p only,
// and only where a kernel user of it is present. Not every distribution kernel
// has it: Debian's 6.1 and 6.12 kernels are built without it.
func checkKernelP2PDMA(f *Facts) Result {
	r := Result{Refs: []string{checkDoc("kernel_p2pdma"), "linux drivers/pci/p2pdma.c", "linux Documentation/driver-api/pci/p2pdma.rst", "linux Documentation/ABI/testing/sysfs-bus-pci (p2pmem)"}}
	kc := f.Node.Platform.KernelConfig
	var providers []string
	for _, d := range f.Node.Topology.Devices {
		if m := d.P2PMem; m != nil {
			providers = append(providers, d.Address.String())
			r.Findings = append(r.Findings, Finding{Subject: d.Address.String(), Status: Pass,
				Message: fmt.Sprintf("p2pmem provider: %s, %s available, published %t", bytesize.Format(m.Size), bytesize.Format(m.Available), m.Published)})
		}
	}
	r.Observed = fmt.Sprintf("CONFIG_PCI_P2PDMA=%s, %d p2pmem provider(s)", kc.Value("CONFIG_PCI_P2PDMA"), len(providers))
	if kc.Source != "" {
		r.Evidence = append(r.Evidence, Evidence{Source: kc.Source, Value: "CONFIG_PCI_P2PDMA=" + kc.Value("CONFIG_PCI_P2PDMA").String()})
	}
	users := f.kernelP2PDMAUsers()
	switch v := kc.Value("CONFIG_PCI_P2PDMA"); {
	case v == procfs.ConfigYes:
		r.Status = Pass
		r.Summary = "kernel built with CONFIG_PCI_P2PDMA"
		if len(providers) > 0 {
			r.Summary += fmt.Sprintf("; %d p2pmem provider(s): %s", len(providers), strings.Join(providers, ", "))
		}
	case len(providers) > 0:
		r.Status = Pass
		r.Summary = fmt.Sprintf("%d p2pmem provider(s) prove P2PDMA is built in", len(providers))
	case !users:
		r.Status = Skip
		r.Summary = "no NVMe controller, RDMA NIC or p2pmem provider here would use the kernel's P2PDMA"
	case v == procfs.ConfigNo:
		r.Status = Fail
		r.Blocks = []Capability{CapNVMeP2P}
		r.Summary = "kernel built without CONFIG_PCI_P2PDMA: kernel P2PDMA users (NVMe CMB, p2pmem, RDMA P2P) cannot work"
		r.Expected = "CONFIG_PCI_P2PDMA=y"
		r.Remediation = []string{"boot a kernel built with CONFIG_PCI_P2PDMA=y; not every distribution kernel has it (Debian's 6.1 and 6.12 do not): check with grep CONFIG_PCI_P2PDMA /boot/config-$(uname -r)"}
	default:
		r.Status = Unknown
		r.Blocks = []Capability{CapNVMeP2P}
		r.Summary = "kernel configuration not found (/proc/config.gz, /boot/config-<release>) and no p2pmem provider: whether the kernel has P2PDMA is unknown"
	}
	return r
}

// checkNVIDIADriver reports the NVIDIA kernel driver's version and flavour from
// /proc/driver/nvidia/version (kernel-open/nvidia/nv-procfs.c in
// open-gpu-kernel-modules) and what the flavour implies: the open modules
// (Turing and newer GPUs) export DMA-BUF, the GPUDirect RDMA path NVIDIA
// recommends, on Linux 5.12+; the proprietary ones need nvidia-peermem, and a
// gdrdrv built for the open flavour cannot load with them (NVIDIA/gdrcopy
// README). NVIDIA GPUs without the driver fail.
func checkNVIDIADriver(f *Facts) Result {
	r := Result{Refs: []string{checkDoc("nvidia_driver"), urlOpenModules, urlGPUDirectRDMA, urlGDRCopy}}
	gpus := f.NVIDIAGPUs()
	drv := f.Node.Platform.NVIDIA
	if len(gpus) == 0 && drv == nil {
		r.Status, r.Summary = Skip, "no NVIDIA GPU"
		return r
	}
	if drv == nil {
		r.Status = Fail
		r.Summary = "NVIDIA GPUs present but the NVIDIA driver is not loaded"
		r.Evidence = []Evidence{{Source: "/proc/driver/nvidia/version", Value: "absent"}}
		r.Remediation = []string{"install and load the NVIDIA driver (modprobe nvidia); prefer the open kernel modules (nvidia-open) on Turing and newer GPUs"}
		for _, g := range gpus {
			r.Subjects = append(r.Subjects, g.Address.String())
		}
		return r
	}
	flavour := "proprietary"
	if drv.Open {
		flavour = "open"
	}
	r.Observed = drv.Version + " " + flavour
	r.Evidence = []Evidence{{Source: "/proc/driver/nvidia/version", Value: drv.Line}}
	r.Status = Pass
	var unbound []string
	for _, g := range gpus {
		if g.Driver != "nvidia" {
			unbound = append(unbound, g.Address.String())
			drvName := g.Driver
			if drvName == "" {
				drvName = "no driver"
			}
			r.Findings = append(r.Findings, Finding{Subject: g.Address.String(), Status: Warn, Message: "GPU bound to " + drvName + ", not nvidia"})
		}
	}
	implies := "GPUDirect RDMA needs nvidia-peermem (these modules export no DMA-BUF); a gdrdrv for them must be built for the proprietary flavour"
	if drv.Open {
		implies = "GPUDirect RDMA can use DMA-BUF on Linux 5.12+; gdrdrv of either build flavour loads"
	}
	r.Summary = fmt.Sprintf("NVIDIA driver %s (%s kernel modules): %s", drv.Version, flavour, implies)
	if len(unbound) > 0 {
		r.Status = Warn
		r.Subjects = unbound
		r.Summary = fmt.Sprintf("%d NVIDIA GPU(s) not bound to the nvidia driver (VFIO passthrough or another driver)", len(unbound))
		r.Remediation = []string{"bind the GPUs to nvidia (echo <bdf> > /sys/bus/pci/drivers/nvidia/bind) unless they are meant for passthrough"}
	}
	return r
}

// checkGPUDirectRDMA reports which GPUDirect RDMA path the node offers to its
// RDMA NICs, the way NCCL decides it (src/transport/net_ib): the peer-memory
// path needs nvidia_peermem loaded or a client registered in
// /sys/kernel/mm/memory_peers (MOFED/DOCA ib_core); the DMA-BUF path, which NCCL
// uses since 2.13 by default (NCCL_DMABUF_ENABLE=1, src/init.cc
// dmaBufSupported), needs a Turing or newer GPU on the open kernel modules,
// Linux 5.12+ with CONFIG_DMA_SHARED_BUFFER, and a NIC whose kernel driver and
// rdma-core register DMA-BUF memory (ibv_reg_dmabuf_mr, rdma-core 34+), which
// NCCL probes per HCA at run time and p2pcheck cannot read: with only that path,
// the result is unknown, never a pass. nv_peer_mem loaded next to nvidia_peermem
// warns, as only one can work.
func checkGPUDirectRDMA(f *Facts) Result {
	r := Result{Refs: []string{checkDoc("gpudirect_rdma"), urlGPUDirectRDMA, "NVIDIA/nccl src/transport/net_ib", urlNCCLEnv}}
	p := f.Node.Platform
	var rdma []string
	for _, n := range f.NICs() {
		rdma = append(rdma, n.RDMADevs...)
	}
	if len(f.NVIDIAGPUs()) == 0 || len(rdma) == 0 {
		r.Status, r.Summary = Skip, "needs an NVIDIA GPU and an RDMA NIC (/sys/class/infiniband)"
		return r
	}
	peermem := hasModule(p, "nvidia_peermem")
	legacy := hasModule(p, "nv_peer_mem")
	var peers []string
	for name := range p.MemoryPeers {
		if strings.HasPrefix(name, "nv_mem") {
			peers = append(peers, name)
		}
	}
	slices.Sort(peers)
	if len(peers) > 0 {
		r.Evidence = append(r.Evidence, Evidence{Source: "/sys/kernel/mm/memory_peers", Value: strings.Join(peers, " ")})
	}
	r.Evidence = append(r.Evidence, Evidence{Source: "/proc/modules", Value: fmt.Sprintf("nvidia_peermem=%t nv_peer_mem=%t", peermem, legacy)})
	d := f.dmabuf()
	r.Findings = append(r.Findings, d.findings...)
	var paths []string
	if f.peermem() {
		paths = append(paths, "peermem")
	}
	switch d.state {
	case Pass:
		paths = append([]string{"dmabuf"}, paths...)
	case Unknown:
		paths = append(paths, "dmabuf (unknown)")
	}
	r.Observed = "paths: " + strings.Join(paths, ", ")
	if len(paths) == 0 {
		r.Observed = "paths: none"
	}
	r.Subjects = rdma
	r.Expected = "dmabuf or peermem"
	dmabufFix := "use the open NVIDIA kernel modules (Turing or newer GPU) on Linux 5.12+ with an rdma-core that has ibv_reg_dmabuf_mr (34+): NCCL 2.13+ then uses DMA-BUF by default (NCCL_DMABUF_ENABLE defaults to 1)"
	peermemFix := "or: modprobe nvidia-peermem (it needs the peer-memory API of MLNX_OFED/DOCA's ib_core)"
	switch {
	case peermem && legacy:
		r.Status = Warn
		r.Summary = "both nvidia_peermem and nv_peer_mem are loaded: only one can register; unload nv_peer_mem"
		r.Remediation = []string{"systemctl disable --now nv_peer_mem && rmmod nv_peer_mem"}
	case f.peermem():
		r.Status = Pass
		r.Summary = "GPUDirect RDMA available through peermem"
		if d.state == Pass {
			r.Summary = "GPUDirect RDMA available through dmabuf and peermem"
		}
		r.Subjects = nil
	case d.state == Unknown:
		r.Status = Unknown
		r.Blocks = []Capability{CapGDR}
		r.Summary = "no nvidia-peermem; DMA-BUF GPUDirect RDMA is possible but unconfirmed: " + d.why
		r.Remediation = []string{"confirm with NCCL_DEBUG=INFO (\"DMA-BUF is available\" and GPU Direct RDMA lines) or rdma-core's ibv_reg_dmabuf_mr; " + strings.TrimPrefix(peermemFix, "or: ")}
	default:
		r.Status = Fail
		r.Blocks = []Capability{CapGDR}
		r.Summary = "no GPUDirect RDMA path: no nvidia-peermem and no DMA-BUF (" + d.why + ")"
		r.Remediation = []string{dmabufFix, peermemFix}
	}
	return r
}

// dmabufVerdict is whether DMA-BUF GPUDirect RDMA is possible: Pass, Fail or
// Unknown, why not (or what is unknown), and one finding per prerequisite.
type dmabufVerdict struct {
	state    Status
	why      string
	findings []Finding
}

// dmabuf judges the DMA-BUF GPUDirect RDMA prerequisites (see
// checkGPUDirectRDMA); a prerequisite that fails makes it Fail, one that cannot
// be read Unknown.
func (f *Facts) dmabuf() dmabufVerdict {
	p := f.Node.Platform
	v := dmabufVerdict{state: Pass}
	var no, unknown []string
	add := func(subject string, s Status, msg string) {
		v.findings = append(v.findings, Finding{Subject: subject, Status: s, Message: msg})
		switch s {
		case Fail:
			no = append(no, msg)
		case Unknown:
			unknown = append(unknown, msg)
		}
	}
	if ok, why := dmabufReady(p); ok {
		add("kernel and driver", Pass, "Linux "+p.Kernel.Release+" with the open NVIDIA kernel modules")
	} else if p.Kernel == nil {
		add("kernel and driver", Unknown, why)
	} else {
		add("kernel and driver", Fail, why)
	}
	switch kc := p.KernelConfig; {
	case kc.Source == "" || kc.Options["CONFIG_DMA_SHARED_BUFFER"] == "":
		add("CONFIG_DMA_SHARED_BUFFER", Unknown, "whether the kernel has CONFIG_DMA_SHARED_BUFFER is unknown")
	case kc.Options["CONFIG_DMA_SHARED_BUFFER"] == "n":
		add("CONFIG_DMA_SHARED_BUFFER", Fail, "the kernel is built without CONFIG_DMA_SHARED_BUFFER")
	}
	for _, g := range f.NVIDIAGPUs() {
		if !turingOrNewer(g) {
			add(g.Address.String(), Fail, fmt.Sprintf("GPU %s (device %04x) is older than Turing: the open kernel modules do not drive it", g.Address, g.Device))
		}
	}
	nics := 0
	for _, n := range f.NICs() {
		for _, dev := range n.RDMADevs {
			nics++
			v.findings = append(v.findings, Finding{Subject: dev, Status: Unknown,
				Message: "whether its driver and rdma-core register DMA-BUF memory (ibv_reg_dmabuf_mr) cannot be read; NCCL probes it per HCA"})
		}
	}
	if nics > 0 {
		unknown = append(unknown, "whether the RDMA NICs' drivers and rdma-core register DMA-BUF memory cannot be read")
	}
	switch {
	case len(no) > 0:
		v.state, v.why = Fail, strings.Join(no, "; ")
	case len(unknown) > 0:
		v.state, v.why = Unknown, strings.Join(unknown, "; ")
	}
	return v
}

// turingOrNewer reports an NVIDIA GPU of the Turing generation or newer, which
// the open kernel modules support (open-gpu-kernel-modules README): their PCI
// device IDs start at 0x1e00 (TU102); Volta and older sit below.
func turingOrNewer(d *pcie.Device) bool { return d.Device >= 0x1e00 }

// dmabufReady reports whether the kernel and NVIDIA driver allow DMA-BUF
// GPUDirect RDMA: Linux 5.12+ (dma-buf importers in RDMA, ib_umem_dmabuf) and the
// open NVIDIA kernel modules, the only ones that export GPU memory as DMA-BUF.
// It gives the reason when not.
func dmabufReady(p node.Platform) (bool, string) {
	switch {
	case p.Kernel == nil:
		return false, "kernel version unknown"
	case !p.Kernel.AtLeast(5, 12):
		return false, "kernel " + p.Kernel.Release + " is older than 5.12"
	case p.NVIDIA == nil:
		return false, "NVIDIA driver not loaded"
	case !p.NVIDIA.Open:
		return false, "proprietary NVIDIA modules do not export DMA-BUF"
	}
	return true, ""
}

func hasModule(p node.Platform, name string) bool {
	return slices.ContainsFunc(p.Modules, func(m procfs.Module) bool { return m.Name == name })
}

// gdrFacts turns the platform facts into gdrdrv readiness facts.
func (f *Facts) gdrFacts() gdrready.Facts {
	p := f.Node.Platform
	var g gdrready.Facts
	if p.Modules != nil {
		loaded := hasModule(p, "gdrdrv")
		g.Module = &loaded
	}
	if p.CharDevices != nil {
		g.DevicesRead = true
		if major, ok := procfs.LookupMajor(p.CharDevices, "gdrdrv"); ok {
			g.Major = &major
		}
	}
	if n := p.GDRDrvNode; n != nil {
		g.Node = &gdrready.Node{Mode: n.Mode, Major: n.Major, Minor: n.Minor, NumberKnown: n.NumberKnown}
	}
	g.Params = p.GDRDrvParams
	if d := p.NVIDIA; d != nil {
		g.Driver = &gdrready.Driver{Version: d.Version, Major: d.Major, Open: d.Open}
	}
	if a := f.GDRDrvAccess; a != nil {
		g.Access = &gdrready.Access{UID: a.UID, ReadWrite: a.ReadWrite}
	}
	g.Arm64 = f.Arm64()
	g.IntelTDXGuest = p.CPU != nil && p.CPU.HasFlag("tdx_guest")
	return g
}

// checkGdrdrv checks the GDRCopy kernel module end to end with the rules of
// package gdrready (loaded, major registered, /dev/gdrdrv a character device
// with that major and minor 0, usable by the running user, build flavour against
// the loaded driver). A gdrdrv that is missing or broken blocks gdrcopy only:
// NCCL uses GDRCopy only on request (NCCL_GDRCOPY_ENABLE), and GDRCopy 2.6 can
// do without gdrdrv through DMA-BUF.
func checkGdrdrv(f *Facts) Result {
	r := Result{Refs: []string{checkDoc("gdrdrv"), urlGDRCopy, "NVIDIA/gdrcopy src/gdrdrv/gdrdrv.c", "NVIDIA/gdrcopy packages/gdrcopy.spec, packages/dkms/debian"}}
	p := f.Node.Platform
	if len(f.NVIDIAGPUs()) == 0 {
		r.Status, r.Summary = Skip, "no NVIDIA GPU"
		return r
	}
	g := f.gdrFacts()
	major, hasMajor := procfs.LookupMajor(p.CharDevices, "gdrdrv")
	r.Evidence = append(r.Evidence,
		Evidence{Source: "/proc/modules", Value: presence(p.Modules != nil, hasModule(p, "gdrdrv"), "gdrdrv")},
		Evidence{Source: "/proc/devices", Value: presence(p.CharDevices != nil, hasMajor, fmt.Sprintf("%d gdrdrv", major))},
		Evidence{Source: "/dev/gdrdrv", Value: nodeString(p.GDRDrvNode)},
	)
	v := gdrready.Judge(g)
	if v.Version != "" {
		r.Evidence = append(r.Evidence, Evidence{Source: "/proc/driver/gdrdrv/params", Value: "Version: " + v.Version + "; flavor: " + v.Flavour})
	}
	if a := g.Access; a != nil {
		r.Evidence = append(r.Evidence, Evidence{Source: "access(/dev/gdrdrv, R_OK|W_OK)", Value: fmt.Sprintf("uid %d: %t", a.UID, a.ReadWrite)})
	}
	r.Expected = "gdrdrv loaded, /dev/gdrdrv c <major> 0 usable by the job's users"
	if !v.Known {
		r.Status, r.Blocks = Unknown, []Capability{CapGDRCopy}
		r.Summary = "/proc/modules and /proc/devices unreadable and no /dev/gdrdrv: gdrdrv's state is unknown"
		return r
	}
	r.Observed = "gdrdrv not loaded"
	if hasModule(p, "gdrdrv") || hasMajor {
		r.Observed = "gdrdrv loaded, /dev/gdrdrv " + nodeString(p.GDRDrvNode)
		if v.Version != "" {
			r.Observed += ", version " + v.Version + ", flavour " + v.Flavour
		}
	}
	for _, pr := range v.Problems {
		s := map[gdrready.Severity]Status{gdrready.Blocking: Fail, gdrready.Degraded: Warn, gdrready.Info: Pass}[pr.Severity]
		r.Findings = append(r.Findings, Finding{Subject: "gdrdrv", Status: s, Message: pr.What})
	}
	if first := v.First(); first != nil {
		r.Summary, r.Remediation = first.What, first.Fix
		r.Status = Warn
		if first.Severity == gdrready.Blocking {
			r.Status, r.Blocks = Fail, []Capability{CapGDRCopy}
		}
		return r
	}
	r.Status = Pass
	r.Summary = "gdrdrv ready"
	if v.Version != "" {
		r.Summary += " (" + v.Version + ", " + v.Flavour + ")"
	}
	for _, pr := range v.Problems {
		r.Summary += "; " + pr.What
	}
	return r
}

func presence(known, present bool, what string) string {
	switch {
	case !known:
		return "unreadable"
	case present:
		return what
	}
	return "no gdrdrv"
}

// nodeString describes a device node as ls -l does: "crw-rw-rw- 235:0".
func nodeString(n *procfs.DevNode) string {
	if n == nil {
		return "absent"
	}
	s := n.Mode.String()
	if n.Mode&fs.ModeCharDevice != 0 {
		s = "c" + n.Mode.Perm().String()[1:]
	}
	if n.NumberKnown {
		s += fmt.Sprintf(" %d:%d", n.Major, n.Minor)
	}
	return s
}
