package check

import (
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/sysfs"
)

// checkVirtualization reports whether the kernel runs under a hypervisor, from
// the x86 "hypervisor" CPU flag (CPUID.1:ECX[31]) in /proc/cpuinfo (F4). It is
// informational: in a VM the PCIe tree, link widths, ACS and NUMA nodes the guest
// sees are the hypervisor's virtual topology, so the link, NUMA and path-class
// checks say so, and GPU P2P depends on the hypervisor exposing a P2P clique.
func checkVirtualization(f *Facts) Result {
	r := Result{Status: Pass, Refs: []string{refF4, "linux arch/x86/kernel/cpu/proc.c (flags)", "cloud-hypervisor#6235"}}
	cpu := f.Node.Platform.CPU
	if cpu == nil {
		r.Status, r.Summary = Skip, "/proc/cpuinfo unreadable: cannot tell bare metal from a VM"
		return r
	}
	if cpu.Hypervisor() {
		r.Observed = "virtual machine"
		r.Summary = "virtual machine (hypervisor CPU flag): pcie_link, numa_node, gpu_nic_affinity and acs_path describe the virtual topology"
		r.Evidence = []Evidence{{Source: "/proc/cpuinfo flags", Value: "hypervisor"}}
		return r
	}
	r.Observed = "bare metal"
	r.Summary = "bare metal (no hypervisor CPU flag)"
	r.Evidence = []Evidence{{Source: "/proc/cpuinfo flags", Value: "no hypervisor flag"}}
	if cpu.VendorID == "" {
		r.Status, r.Summary = Skip, "no x86 hypervisor flag to read on this CPU"
	}
	return r
}

// checkIOMMU reports how the IOMMU treats DMA (F2): passthrough (identity
// default domains, iommu=pt) or translation (DMA, DMA-FQ). With translation,
// peer-to-peer traffic through the root complex is remapped and on bare metal
// NVIDIA does not support it: copies return wrong data or hang (pt#84803). The
// group types come from /sys/kernel/iommu_groups/*/type (Linux 5.11+,
// drivers/iommu/iommu.c), the hardware units from /sys/class/iommu and the
// options from /proc/cmdline.
func checkIOMMU(f *Facts) Result {
	p := f.Node.Platform
	r := Result{Refs: []string{refF2, "linux drivers/iommu/iommu.c iommu_group_show_type", "NVIDIA NIM multi-GPU: IOMMU-enabled P2P not supported on bare metal"}}
	var opts []string
	if p.Cmdline != nil {
		for _, name := range []string{"iommu", "intel_iommu", "amd_iommu", "iommu.passthrough", "iommu.strict"} {
			if v, ok := p.Cmdline.Lookup(name); ok {
				opts = append(opts, name+"="+v)
			}
		}
		r.Evidence = append(r.Evidence, Evidence{Source: "/proc/cmdline", Value: strings.Join(opts, " ")})
	}
	if p.IOMMUUnits != nil {
		r.Evidence = append(r.Evidence, Evidence{Source: "/sys/class/iommu", Value: strings.Join(p.IOMMUUnits, " ")})
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
	var translated []string
	for _, d := range f.devices {
		if d.IOMMUGroup == nil {
			continue
		}
		t := types[*d.IOMMUGroup]
		counts[t]++
		if t.Translated() {
			translated = append(translated, d.Address.String())
			r.Findings = append(r.Findings, Finding{Subject: d.Address.String(), Status: Warn, Message: fmt.Sprintf("%s in IOMMU group %d of type %s", kind(d), *d.IOMMUGroup, t)})
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
	r.Expected = "identity (passthrough) or no IOMMU"
	passthrough := slices.Contains(opts, "iommu=pt") || slices.Contains(opts, "iommu.passthrough=1")
	switch {
	case len(translated) > 0 && !f.hasPairs():
		r.Status = Pass
		r.Summary = fmt.Sprintf("IOMMU translates DMA for %d device(s), but no GPU/NIC/NVMe peer pair is affected", len(translated))
		r.Findings = nil
	case len(translated) > 0:
		r.Status = Fail
		r.Summary = fmt.Sprintf("IOMMU translates DMA for %d device(s) of interest: peer-to-peer through it is unsupported on bare metal", len(translated))
		if f.Hypervisor() {
			r.Status = Warn
			r.Summary = fmt.Sprintf("guest IOMMU translates DMA for %d device(s): P2P needs the hypervisor's support", len(translated))
		}
		r.Subjects = translated
		r.Remediation = []string{"add iommu=pt to the kernel command line (with " + vendorIOMMUParam(f) + "), or disable the IOMMU (VT-d / AMD-Vi) in the BIOS, then reboot"}
	case counts[sysfs.IOMMUIdentity] > 0 && counts[sysfs.IOMMUUnknown] == 0:
		r.Status = Pass
		r.Summary = "IOMMU in passthrough (identity domains)"
	case passthrough:
		r.Status = Pass
		r.Summary = "IOMMU group types unreadable; the command line asks for passthrough (" + strings.Join(opts, " ") + ")"
	default:
		r.Status = Skip
		r.Summary = "IOMMU active but its domain types are unknown (kernel older than 5.11?) and iommu=pt is not on the command line"
		r.Remediation = []string{"check 'dmesg | grep -i -e DMAR -e AMD-Vi -e iommu' for the default domain type; add iommu=pt if it is translated"}
	}
	return r
}

// kernelP2PDMAUsers reports whether some pair of interest has an endpoint that
// moves data through the kernel's P2PDMA: an NVMe controller, an RDMA NIC or a
// p2pmem provider.
//
// It looks for such a device first, then for a partner of it, rather than at every
// pair: a node of GPUs alone has millions of pairs and none of these devices.
func (f *Facts) kernelP2PDMAUsers() bool {
	for i, d := range f.devices {
		if !d.IsNVMe() && !isRDMANIC(d) && d.P2PMem == nil {
			continue
		}
		for j, e := range f.devices {
			if i != j && pairOfInterest(d, e) { // pairOfInterest is symmetric
				return true
			}
		}
	}
	return false
}

func vendorIOMMUParam(f *Facts) string {
	if c := f.Node.Platform.CPU; c != nil && c.VendorID == "AuthenticAMD" {
		return "amd_iommu=on"
	}
	return "intel_iommu=on"
}

// checkKernelP2PDMA reports whether the kernel was built with CONFIG_PCI_P2PDMA,
// which kernel peer-to-peer users need (NVMe controller memory buffers, p2pmem,
// RDMA and NVMe-oF target offload through struct pages; drivers/pci/p2pdma.c),
// and lists the p2pmem providers (/sys/bus/pci/devices/*/p2pmem). NVIDIA GPU
// P2P and GPUDirect RDMA do not depend on it, so its absence warns, and only
// where a kernel user of it is present.
func checkKernelP2PDMA(f *Facts) Result {
	r := Result{Refs: []string{refP2PDMA, "linux Documentation/driver-api/pci/p2pdma.rst", "linux Documentation/ABI/testing/sysfs-bus-pci (p2pmem)"}}
	kc := f.Node.Platform.KernelConfig
	var providers []string
	for _, d := range f.Node.Topology.Devices {
		if m := d.P2PMem; m != nil {
			providers = append(providers, d.Address.String())
			r.Findings = append(r.Findings, Finding{Subject: d.Address.String(), Status: Pass,
				Message: fmt.Sprintf("p2pmem provider: %s, %s available, published %t", sizeString(m.Size), sizeString(m.Available), m.Published)})
		}
	}
	r.Observed = fmt.Sprintf("CONFIG_PCI_P2PDMA=%s, %d p2pmem provider(s)", kc.Value("CONFIG_PCI_P2PDMA"), len(providers))
	if kc.Source != "" {
		r.Evidence = append(r.Evidence, Evidence{Source: kc.Source, Value: "CONFIG_PCI_P2PDMA=" + kc.Value("CONFIG_PCI_P2PDMA").String()})
	}
	switch v := kc.Value("CONFIG_PCI_P2PDMA"); {
	case v == sysfs.ConfigYes:
		r.Status = Pass
		r.Summary = "kernel built with CONFIG_PCI_P2PDMA"
		if len(providers) > 0 {
			r.Summary += fmt.Sprintf("; %d p2pmem provider(s): %s", len(providers), strings.Join(providers, ", "))
		}
	case v == sysfs.ConfigNo && !f.kernelP2PDMAUsers():
		r.Status = Skip
		r.Summary = "kernel built without CONFIG_PCI_P2PDMA, but no NVMe controller, RDMA NIC or p2pmem provider here would use it"
	case v == sysfs.ConfigNo:
		r.Status = Warn
		r.Summary = "kernel built without CONFIG_PCI_P2PDMA: kernel P2PDMA users (NVMe CMB, p2pmem, RDMA P2P) cannot work"
		r.Expected = "CONFIG_PCI_P2PDMA=y"
		r.Remediation = []string{"use a kernel built with CONFIG_PCI_P2PDMA=y (most distribution kernels since 5.x)"}
	case len(providers) > 0:
		r.Status = Pass
		r.Summary = fmt.Sprintf("kernel configuration not found, but %d p2pmem provider(s) prove P2PDMA is built in", len(providers))
	default:
		r.Status = Skip
		r.Summary = "kernel configuration not found (/proc/config.gz, /boot/config-<release>)"
	}
	return r
}

// checkNVIDIADriver reports the NVIDIA kernel driver's version and flavour from
// /proc/driver/nvidia/version (open-gpu-kernel-modules nv-procfs.c) and what the
// flavour implies (F8, F9): the open modules (R515+) give DMA-BUF GPUDirect RDMA
// on Linux 5.12+ and need gdrdrv built for the open flavour; the proprietary ones
// need nvidia-peermem for GPUDirect RDMA. NVIDIA GPUs without the driver fail.
func checkNVIDIADriver(f *Facts) Result {
	r := Result{Refs: []string{"field-checks.md F8 (DMA-BUF prerequisites)", "field-checks.md F9 (gdrdrv flavour)", "NVIDIA open-gpu-kernel-modules kernel-open/nvidia/nv-procfs.c"}}
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
		r.Remediation = []string{"install and load the NVIDIA driver (modprobe nvidia); prefer the open kernel modules (nvidia-open) on Turing and newer"}
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
	implies := "gdrdrv must be built for the proprietary flavour; GPUDirect RDMA needs nvidia-peermem (no DMA-BUF)"
	if drv.Open {
		implies = "gdrdrv must be built for the open flavour; GPUDirect RDMA can use DMA-BUF"
		if drv.Major > 0 && drv.Major < 515 {
			implies = "open modules before R515 lack DMA-BUF export"
		}
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
// RDMA NICs (F7, F8), the way NCCL decides it (src/transport/net_ib): the
// peer-memory path needs nvidia_peermem loaded or a client registered in
// /sys/kernel/mm/memory_peers (MOFED/DOCA ib_core); the DMA-BUF path needs Linux
// 5.12+ and the open NVIDIA modules R515+. Neither fails; nv_peer_mem loaded next
// to nvidia_peermem warns, as only one can work.
func checkGPUDirectRDMA(f *Facts) Result {
	r := Result{Refs: []string{"field-checks.md F7 (nvidia-peermem)", "field-checks.md F8 (DMA-BUF)", "NVIDIA GPU Operator RDMA doc (DMA-BUF recommended)", "nccl#1676"}}
	p := f.Node.Platform
	var rdma []string
	for _, n := range f.NICs() {
		if len(n.RDMADevs) > 0 {
			rdma = append(rdma, n.RDMADevs...)
		}
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
	paths := f.gdrPaths()
	_, why := dmabufReady(p)
	r.Observed = "paths: " + strings.Join(paths, ", ")
	if len(paths) == 0 {
		r.Observed = "paths: none"
	}
	r.Subjects = rdma
	r.Expected = "dmabuf or peermem"
	switch {
	case len(paths) == 0:
		r.Status = Fail
		r.Summary = "no GPUDirect RDMA path: no nvidia_peermem and no DMA-BUF (" + why + ")"
		r.Remediation = []string{
			"use the open NVIDIA kernel modules (R515+) on Linux 5.12+ for DMA-BUF (NCCL 2.19+, NCCL_DMABUF_ENABLE=1)",
			"or: modprobe nvidia-peermem (needs MOFED/DOCA ib_core)",
		}
	case peermem && legacy:
		r.Status = Warn
		r.Summary = "both nvidia_peermem and nv_peer_mem are loaded: only one can register; unload nv_peer_mem"
		r.Remediation = []string{"systemctl disable --now nv_peer_mem && rmmod nv_peer_mem"}
	default:
		r.Status = Pass
		r.Summary = "GPUDirect RDMA available through " + strings.Join(paths, " and ")
		r.Subjects = nil
	}
	return r
}

// dmabufReady reports whether the kernel and NVIDIA driver allow DMA-BUF
// GPUDirect RDMA, with the reason when not.
func dmabufReady(p sysfs.Platform) (bool, string) {
	switch {
	case p.Kernel == nil:
		return false, "kernel version unknown"
	case !p.Kernel.AtLeast(5, 12):
		return false, "kernel " + p.Kernel.Release + " is older than 5.12"
	case p.NVIDIA == nil:
		return false, "NVIDIA driver not loaded"
	case !p.NVIDIA.Open:
		return false, "proprietary NVIDIA modules do not export DMA-BUF"
	case p.NVIDIA.Major < 515:
		return false, "NVIDIA driver older than R515"
	}
	return true, ""
}

func hasModule(p sysfs.Platform, name string) bool {
	return slices.ContainsFunc(p.Modules, func(m sysfs.Module) bool { return m.Name == name })
}

// GDRCopy's instructions for loading gdrdrv (gdrcopy README, insmod.sh).
const (
	fixLoadGdrdrv = "load gdrdrv: sudo systemctl start gdrcopy (packaged service) or, from the GDRCopy source tree, sudo ./insmod.sh; both create /dev/gdrdrv"
	fixDMABufMmap = "or, without gdrdrv: GDRCopy 2.6+ with GDRCOPY_USE_DMABUF_MMAP=1 (CUDA driver 13.3+)"
)

// checkGdrdrv checks the GDRCopy kernel module end to end (F9): loaded
// (/proc/modules), its character major registered (/proc/devices, register_chrdev
// "gdrdrv"), /dev/gdrdrv a character device with that major (a stale node from an
// earlier load has another), readable and writable by every user as GDRCopy's
// insmod.sh makes it (0666) and by the running user on the live machine, and, from /proc/driver/gdrdrv/params (2.5+), its
// version and the NVIDIA flavour it was built for, which must match the loaded
// driver's (gdrcopy README "flavor"). A missing gdrdrv fails with the fix.
func checkGdrdrv(f *Facts) Result {
	r := Result{Refs: []string{"field-checks.md F9 (gdrdrv not loaded, /dev/gdrdrv, permissions)", "NVIDIA/gdrcopy README, insmod.sh", "gdrcopy#138", "gdrcopy#251"}}
	p := f.Node.Platform
	if len(f.NVIDIAGPUs()) == 0 {
		r.Status, r.Summary = Skip, "no NVIDIA GPU"
		return r
	}
	loaded := hasModule(p, "gdrdrv")
	major, hasMajor := sysfs.LookupMajor(p.CharDevices, "gdrdrv")
	node := p.GDRDrvNode
	r.Evidence = append(r.Evidence,
		Evidence{Source: "/proc/modules", Value: presence(p.Modules != nil, loaded, "gdrdrv")},
		Evidence{Source: "/proc/devices", Value: presence(p.CharDevices != nil, hasMajor, fmt.Sprintf("%d gdrdrv", major))},
		Evidence{Source: "/dev/gdrdrv", Value: nodeString(node)},
	)
	if v, ok := p.GDRDrvParams["Version"]; ok {
		r.Evidence = append(r.Evidence, Evidence{Source: "/proc/driver/gdrdrv/params", Value: "Version: " + v + "; flavor: " + p.GDRDrvParams["Built for NVIDIA driver flavor"]})
	}
	r.Expected = "gdrdrv loaded, /dev/gdrdrv c <major> 0 mode 0666, flavour matching the NVIDIA driver"
	fail := func(summary string, fix ...string) Result {
		r.Status, r.Summary, r.Remediation = Fail, summary, fix
		return r
	}
	switch {
	case p.Modules == nil && p.CharDevices == nil && node == nil:
		r.Status, r.Summary = Skip, "/proc/modules and /proc/devices unreadable and no /dev/gdrdrv"
		return r
	case !loaded && !hasMajor:
		r.Observed = "gdrdrv not loaded"
		if node != nil {
			return fail("gdrdrv is not loaded (a stale /dev/gdrdrv exists)", fixLoadGdrdrv, fixDMABufMmap)
		}
		return fail("gdrdrv is not loaded: GDRCopy cannot open /dev/gdrdrv", fixLoadGdrdrv, fixDMABufMmap)
	case node == nil:
		r.Observed = fmt.Sprintf("gdrdrv loaded (major %d), no /dev/gdrdrv", major)
		return fail("gdrdrv is loaded but /dev/gdrdrv is missing (in a container: not passed in)",
			fmt.Sprintf("sudo mknod -m 666 /dev/gdrdrv c %d 0", major),
			"in a container: docker run --device=/dev/gdrdrv (GPU Operator: GDRCOPY_ENABLED)")
	case node.Mode&fs.ModeCharDevice == 0:
		r.Observed = "/dev/gdrdrv is " + nodeString(node)
		return fail("/dev/gdrdrv is not a character device", fmt.Sprintf("sudo rm /dev/gdrdrv && sudo mknod -m 666 /dev/gdrdrv c %d 0", major))
	case hasMajor && node.NumberKnown && node.Major != major:
		r.Observed = fmt.Sprintf("/dev/gdrdrv is %d:%d, gdrdrv registered major %d", node.Major, node.Minor, major)
		return fail("/dev/gdrdrv has a stale major number: opening it reaches another driver or none",
			fmt.Sprintf("sudo rm /dev/gdrdrv && sudo mknod -m 666 /dev/gdrdrv c %d 0", major))
	}
	r.Status = Pass
	version := p.GDRDrvParams["Version"]
	flavour := p.GDRDrvParams["Built for NVIDIA driver flavor"]
	r.Observed = fmt.Sprintf("gdrdrv loaded, /dev/gdrdrv %s", nodeString(node))
	if version != "" {
		r.Observed += ", version " + version + ", flavour " + flavour
	}
	r.Summary = "gdrdrv ready"
	if version != "" {
		r.Summary += " (" + version + ", " + flavour + ")"
	} else {
		r.Summary += " (no /proc/driver/gdrdrv/params: GDRCopy older than 2.5, version unknown)"
	}
	if drv := p.NVIDIA; drv != nil && flavour != "" {
		if want := map[bool]string{true: "opensource", false: "proprietary"}[drv.Open]; !strings.EqualFold(flavour, want) {
			return fail(fmt.Sprintf("gdrdrv built for the %s NVIDIA driver but the %s one is loaded", flavour, want),
				"rebuild gdrdrv against the loaded driver (the gdrdrv-dkms package builds for the installed flavour) and reload it")
		}
	}
	if a := f.GDRDrvAccess; a != nil {
		r.Evidence = append(r.Evidence, Evidence{Source: "access(/dev/gdrdrv, R_OK|W_OK)", Value: fmt.Sprintf("uid %d: %t", a.UID, a.ReadWrite)})
		if !a.ReadWrite {
			r.Status = Warn
			r.Subjects = []string{fmt.Sprintf("uid %d", a.UID)}
			r.Summary = fmt.Sprintf("/dev/gdrdrv mode %04o: the running user (uid %d) cannot open it read-write", node.Mode.Perm(), a.UID)
			r.Remediation = []string{"sudo chmod 666 /dev/gdrdrv (GDRCopy's insmod.sh creates it 0666)"}
			return r
		}
	}
	if node.Mode.Perm()&0o006 != 0o006 {
		r.Status = Warn
		r.Summary = fmt.Sprintf("/dev/gdrdrv mode %04o: only its owner or group can use GDRCopy", node.Mode.Perm())
		r.Remediation = []string{"sudo chmod 666 /dev/gdrdrv (GDRCopy's insmod.sh creates it 0666)"}
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
func nodeString(n *sysfs.DevNode) string {
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

// memlockMin is the RLIMIT_MEMLOCK AWS's GPU cluster health check requires for
// RDMA registration (field-checks.md F14).
const memlockMin = 16 << 30

// checkMemlock checks RLIMIT_MEMLOCK of the running process (F14): RDMA memory
// registration pins host pages against it, and a low limit makes ibv_reg_mr fail
// ("Couldn't allocate MR"). Only the live process has a limit to read, and it
// only matters with an RDMA NIC.
func checkMemlock(f *Facts) Result {
	r := Result{Refs: []string{"field-checks.md F14 (ulimit -l)", "AWS gpu-cluster-healthcheck README", "getrlimit(2)"}}
	if f.Memlock == nil {
		r.Status = Skip
		r.Summary = "RLIMIT_MEMLOCK is a property of a running process: unknown for a snapshot or another root"
		return r
	}
	if len(f.NICs()) == 0 {
		r.Status = Skip
		r.Summary = "no RDMA NIC: the limit only bounds RDMA memory registration"
		return r
	}
	r.Observed = "soft " + limitString(f.Memlock.Soft) + ", hard " + limitString(f.Memlock.Hard)
	r.Expected = "unlimited, or at least 16 GiB"
	r.Evidence = []Evidence{{Source: "getrlimit(RLIMIT_MEMLOCK)", Value: r.Observed}}
	if f.Memlock.Soft == Unlimited || f.Memlock.Soft >= memlockMin {
		r.Status, r.Summary = Pass, "locked-memory limit "+limitString(f.Memlock.Soft)
		return r
	}
	r.Status = Warn
	r.Summary = "locked-memory limit " + limitString(f.Memlock.Soft) + " is too low for RDMA registrations"
	r.Remediation = []string{"set 'memlock unlimited' in /etc/security/limits.conf (LimitMEMLOCK=infinity for systemd services, --ulimit memlock=-1 for containers)"}
	return r
}

func limitString(v uint64) string {
	if v == Unlimited {
		return "unlimited"
	}
	return sizeString(v)
}

// ncclDisables lists the NCCL settings that switch off a peer path, with what
// each means (NVIDIA/nccl docs, env.html).
var ncclDisables = []struct {
	name    string
	bad     func(string) bool
	meaning string
}{
	{"NCCL_P2P_DISABLE", isTrue, "disables GPU peer-to-peer entirely"},
	{"NCCL_P2P_LEVEL", func(v string) bool { return slices.Contains([]string{"LOC", "0", "NVL", "1"}, strings.ToUpper(v)) }, "keeps PCIe P2P off"},
	{"NCCL_NET_GDR_LEVEL", func(v string) bool { return slices.Contains([]string{"LOC", "0"}, strings.ToUpper(v)) }, "disables GPUDirect RDMA"},
	{"NCCL_IB_DISABLE", isTrue, "disables InfiniBand/RoCE: traffic falls back to sockets"},
	{"NCCL_DMABUF_ENABLE", func(v string) bool { return v == "0" }, "disables DMA-BUF GPUDirect RDMA"},
	{"NCCL_SHM_DISABLE", isTrue, "disables the shared-memory fallback"},
}

func isTrue(v string) bool { n, err := strconv.Atoi(v); return err == nil && n != 0 }

// checkNCCLEnv finds NCCL settings that silently switch off P2P or GPUDirect RDMA
// (field-checks.md §4a #25, nccl#1676): in the environment p2pcheck runs in (live
// only; jobs inherit a node's profile) and in /etc/nccl.conf. The environment
// wins over the file, as in NCCL (src/misc/param.cc).
func checkNCCLEnv(f *Facts) Result {
	r := Result{Refs: []string{"field-checks.md §4a #25 (nccl_env_overrides)", "NVIDIA/nccl src/misc/param.cc", "nccl#1676"}}
	if f.NCCLEnv == nil && f.NCCLConf == nil {
		r.Status = Skip
		r.Summary = "no environment to read (snapshot or another root) and no /etc/nccl.conf"
		return r
	}
	effective := map[string]string{}
	where := map[string]string{}
	if c := f.NCCLConf; c != nil {
		for k, v := range c.Vars {
			effective[k], where[k] = v, c.Path
		}
	}
	for k, v := range f.NCCLEnv {
		effective[k], where[k] = v, "environment"
	}
	names := make([]string, 0, len(effective))
	for k := range effective {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		r.Evidence = append(r.Evidence, Evidence{Source: where[k], Value: k + "=" + effective[k]})
	}
	r.Status = Pass
	for _, d := range ncclDisables {
		v, ok := effective[d.name]
		if !ok || !d.bad(v) {
			continue
		}
		r.Status = Warn
		s := d.name + "=" + v
		r.Subjects = append(r.Subjects, s)
		r.Findings = append(r.Findings, Finding{Subject: s, Status: Warn, Message: d.meaning + " (from " + where[d.name] + ")"})
		if where[d.name] == "environment" {
			r.Remediation = append(r.Remediation, "unset "+d.name)
		} else {
			r.Remediation = append(r.Remediation, "remove "+d.name+" from "+where[d.name])
		}
	}
	if len(names) == 0 {
		r.Observed = "no NCCL_* settings"
	} else {
		r.Observed = strings.Join(names, ", ")
	}
	if r.Status == Pass {
		r.Summary = "no NCCL setting disables P2P or GPUDirect RDMA"
	} else {
		r.Summary = "NCCL settings disable peer paths: " + strings.Join(r.Subjects, ", ")
	}
	return r
}

// ParseNCCLConf parses an NCCL configuration file (/etc/nccl.conf, ~/.nccl.conf):
// "NAME=value" lines, '#' starting a comment line, as NCCL's initEnv reads them
// (src/misc/param.cc). Lines without '=' are ignored.
func ParseNCCLConf(path string, b []byte) *NCCLConf {
	c := &NCCLConf{Path: path, Vars: map[string]string{}}
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) == "" {
			continue
		}
		c.Vars[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return c
}
