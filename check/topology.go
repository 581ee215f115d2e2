package check

import (
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/internal/bytesize"
	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pathclass"
	"github.com/p2pkit/p2pkit/pcie"
)

// References shared by several checks.
const (
	refP2PDMA  = "linux drivers/pci/p2pdma.c calc_map_type_and_dist()"
	refACSRedi = "linux drivers/pci/pci.c pci_disable_acs_redir()"
	refNCCLVM  = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html (PCI Access Control Services; virtual machines)"
	refSysfs   = "linux Documentation/ABI/testing/sysfs-bus-pci"
)

// docRef is the reference to a check's page under docs/checks.
func docRef(id string) string { return "docs/checks/" + id + ".md" }

const noPairs = "fewer than two GPUs, NICs or NVMe controllers: no peer-to-peer pair to judge"

// deviceBlocks returns the capabilities a problem on a device of interest
// stands in the way of, by its role.
func deviceBlocks(d *pcie.Device) []Capability {
	switch {
	case d.IsNVMe() || d.P2PMem != nil:
		return []Capability{CapNVMeP2P}
	case d.IsGPU() || d.IsAccelerator():
		return []Capability{CapP2P, CapGDR}
	case isRDMANIC(d):
		return []Capability{CapGDR}
	}
	return nil
}

// addBlocks adds capabilities to r.Blocks once each, in [Capabilities] order.
func (r *Result) addBlocks(cs ...Capability) {
	have := map[Capability]bool{}
	for _, c := range slices.Concat(r.Blocks, cs) {
		have[c] = true
	}
	r.Blocks = r.Blocks[:0]
	for _, c := range capabilities {
		if have[c] {
			r.Blocks = append(r.Blocks, c)
		}
	}
}

// behindVMD reports whether d sits in an Intel VMD domain: the vmd driver
// numbers its domains from 0x10000 up (drivers/pci/controller/vmd.c
// vmd_find_free_domain), above the 16-bit domains of ACPI host bridges. The
// kernel's P2PDMA finds no whitelisted host bridge there.
func behindVMD(d *pcie.Device) bool { return d.HostBridge != nil && d.HostBridge.Domain >= 0x10000 }

// checkReachability reports the pairs the kernel's P2PDMA code refuses
// (not-supported): peers under host bridges the kernel does not whitelist, or
// below different root complexes without the AMD Zen rule
// (drivers/pci/p2pdma.c calc_map_type_and_dist, cpu_supports_p2pdma). It
// judges the kernel's P2PDMA users only: a refused or unknown pair with an NVMe
// controller or a p2pmem provider (NVMe CMB, p2pmem, RDMA on p2pdma pages)
// warns or is unknown, and blocks nvme-p2p. GPU pairs are listed but never
// judged here: NVIDIA GPUs copy peer-to-peer on the NVIDIA driver's own
// decision (nvml_p2p_status), and GPUDirect RDMA between a GPU and a NIC
// (nvidia-peermem or DMA-BUF) never goes through the kernel's P2PDMA.
func checkReachability(f *Facts) Result {
	r := Result{Refs: []string{docRef("p2p_reachability"), refP2PDMA, "linux Documentation/driver-api/pci/p2pdma.rst"}}
	sc := f.scan()
	if sc.n == 0 {
		r.Status, r.Summary = Skip, noPairs
		return r
	}
	s := &sc.reach
	counts, refusedGPU, refused, unknown, vmd, users := &s.counts, s.refusedGPU, s.refused, s.unknown, s.vmd, s.users
	r.Status = Pass
	if refused > 0 {
		r.Status = Warn
		r.addBlocks(CapNVMeP2P)
	}
	r.Subjects = slices.Clone(s.lines.subjects)
	s.lines.listFindings(&r)
	r.Observed = mapTypeCounts(counts)
	r.Expected = "bus-addr or thru-host-bridge for every pair with an NVMe controller or p2pmem provider"
	switch {
	case refused > 0:
		r.Summary = fmt.Sprintf("the kernel refuses P2PDMA for %d pair(s) with an NVMe controller or p2pmem provider", refused)
		if vmd > 0 {
			r.Remediation = append(r.Remediation, "disable Intel VMD (Volume Management Device) for these NVMe drives in the BIOS, or bind the NVMe outside the VMD domain: the kernel's P2PDMA does not reach devices behind VMD")
		}
		r.Remediation = append(r.Remediation,
			"place peers below one PCIe switch or one root complex, or use a CPU/host bridge the kernel whitelists (drivers/pci/p2pdma.c pci_p2pdma_whitelist)")
		if unknown > 0 {
			r.Summary += fmt.Sprintf("; %d more pair(s) unknown", unknown)
		}
	case unknown > 0:
		r.Status = Unknown
		r.addBlocks(CapNVMeP2P)
		r.Summary = fmt.Sprintf("the kernel's verdict is unknown for %d pair(s) with an NVMe controller or p2pmem provider, e.g. %s", unknown, s.why)
		if s.acsUnknown {
			r.Summary += " (" + f.unreadable() + ")"
			r.Remediation = []string{f.seeConfig("ACS Control")}
		} else {
			r.Remediation = []string{"p2pcheck does not model this kernel's rule for these pairs: when a P2PDMA user (an NVMe-oF target with p2pmem, a p2pmem allocation) asks for a pair the kernel refuses, it logs \"cannot be used for peer-to-peer DMA\"; check dmesg"}
		}
	case users == 0:
		r.Status = Skip
		r.Summary = "no pair with an NVMe controller or p2pmem provider: GPU peer copies and GPUDirect RDMA do not use the kernel's P2PDMA (verdicts: " + r.Observed + ")"
	case refusedGPU > 0:
		r.Summary = fmt.Sprintf("the kernel refuses P2PDMA only for %d pair(s) of GPUs and NICs, which do not use it (GPU copies follow the NVIDIA driver, GPUDirect RDMA uses nvidia-peermem or DMA-BUF)", refusedGPU)
	default:
		r.Summary = fmt.Sprintf("the kernel allows P2PDMA for all %d pair(s): %s", sc.n, r.Observed)
	}
	return r
}

func pairSubject(p pair) string { return p.a.Address.String() + "<->" + p.b.Address.String() }

func mapTypeCounts(c *mapTypeCount) string {
	var parts []string
	for _, m := range []p2pdma.MapType{p2pdma.BusAddr, p2pdma.ThruHostBridge, p2pdma.NotSupported, p2pdma.Unknown} {
		if c[m] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c[m], m))
		}
	}
	return strings.Join(parts, ", ")
}

// checkACSPath finds bridges with ACS Request/Completion Redirect or Egress
// Control set between peers that share an upstream bridge: the kernel then
// routes their traffic through the root complex, NCCL hangs or crawls and
// GPUDirect RDMA fails with local protection errors (the ACS test of
// drivers/pci/p2pdma.c calc_map_type_and_dist). It gives both fixes the kernel
// offers: the boot parameter pci=disable_acs_redir= and a setpci per bridge
// (drivers/pci/pci.c pci_disable_acs_redir; p2pdma.Fix). ACS that could not be
// read (config space past offset 64 needs CAP_SYS_ADMIN) is unknown, never
// passed. A failure blocks what the redirected pairs need: p2p for GPU pairs,
// gdr for GPU-NIC pairs, nvme-p2p for pairs with NVMe or p2pmem.
//
// In a virtual machine the guest's bridges are virtual: their ACS bits do not
// route the physical traffic, so the check does not apply and offers no setpci;
// NCCL's troubleshooting guide says a VM needs ACS enabled on the host and ATS
// on the NICs.
func checkACSPath(f *Facts) Result {
	r := Result{Refs: []string{docRef("acs_path"), refP2PDMA, refACSRedi, refNCCLVM}}
	sc := f.scan()
	if sc.n == 0 {
		r.Status, r.Summary = Skip, noPairs
		return r
	}
	s := &sc.acs
	bridges, setpci := s.bridges, s.setpci
	addrs := sortedKeys(bridges)
	if f.Hypervisor() {
		r.Status = Skip
		r.Summary = "virtual machine: the guest's bridges are virtual and their ACS does not route physical P2P; NCCL's troubleshooting guide says VMs need ACS enabled on the host and ATS on the NICs"
		if len(addrs) > 0 {
			r.Observed = fmt.Sprintf("ACS redirect set on %d guest bridge(s): %s", len(addrs), addrList(addrs))
		}
		return r
	}
	switch {
	case len(addrs) > 0:
		r.Status = Fail
		r.addBlocks(s.redirectBlocks...)
		r.Summary = fmt.Sprintf("ACS redirect on %d bridge(s) between peers: their traffic is forced through the root complex", len(addrs))
		for _, a := range addrs {
			d := f.Node.Topology.Device(a)
			acs, _ := d.ACS()
			r.Subjects = append(r.Subjects, a.String())
			r.Findings = append(r.Findings, Finding{Subject: a.String(), Status: Fail,
				Message: fmt.Sprintf("%s, ACSCtl %s, on the path of %d pair(s), e.g. %s; fix: %s", bridgeWhat(d), pcie.ACSString(acs.Control), bridges[a].n, bridges[a].first, setpci[a])})
			r.Evidence = append(r.Evidence, Evidence{Source: "/sys/bus/pci/devices/" + a.String() + "/config ECAP_ACS+6.w", Value: fmt.Sprintf("%04x", acs.Control)})
		}
		names := addrList(addrs)
		r.Observed = "ACS redirect (RR/CR/EC) set on " + names
		r.Expected = "no ACS redirect between peers below a common bridge"
		r.Remediation = append(r.Remediation, "kernel command line: \""+"pci=disable_acs_redir="+strings.ReplaceAll(names, ", ", ";")+"\" (quote it: the ';' is part of it), or disable ACS in the BIOS")
		r.Remediation = append(r.Remediation, setpciAll(addrs, setpci)+" (at run time, lost at reboot)")
		if s.unknown > 0 {
			r.Summary += fmt.Sprintf("; %d more pair(s) unknown", s.unknown)
		}
	case s.unknown > 0:
		r.Status = Unknown
		r.addBlocks(s.unknownBlocks...)
		r.Summary = fmt.Sprintf("ACS unknown on the paths of %d of %d pairs: %s", s.unknown, sc.n, f.unreadable())
		r.Subjects = slices.Clone(s.lines.subjects)
		r.Remediation = []string{f.seeConfig("ACS Control")}
	default:
		r.Status = Pass
		r.Summary = fmt.Sprintf("no ACS redirect between the %d peer pair(s)", sc.n)
		r.Observed = "ACS redirect clear on every shared path"
	}
	return r
}

// acsUnread reports whether verdict v depends on ACS Control that was not read:
// one of its unknowns is the "ACS Control of <bdf> was not read" of p2pdma's
// acsRedirState. Other unknowns (host-bridge rules of old kernels) do not
// concern ACS.
func acsUnread(v p2pdma.Verdict) bool {
	for _, u := range v.Unknowns {
		if strings.HasPrefix(u, "ACS Control of ") {
			return true
		}
	}
	return false
}

// addrList joins addresses with ", ".
func addrList(addrs []pcie.Address) string {
	names := make([]string, len(addrs))
	for i, a := range addrs {
		names[i] = a.String()
	}
	return strings.Join(names, ", ")
}

// seeConfig says how to read a fact of extended configuration space (what)
// that this run could not read.
func (f *Facts) seeConfig(what string) string {
	if f.PrivilegeKnown && !f.Privileged {
		return "run p2pcheck as root (CAP_SYS_ADMIN) to read " + what + " past config space offset 64 (/sys/bus/pci/devices/<bdf>/config)"
	}
	return "read /sys/bus/pci/devices/<bdf>/config of the functions named in the warnings as root (CAP_SYS_ADMIN): " + what + " is in extended config space"
}

// numaString is a device's NUMA node, "?" when unknown or -1.
func numaString(d *pcie.Device) string {
	if d.NUMANode == nil || *d.NUMANode < 0 {
		return "?"
	}
	return strconv.Itoa(*d.NUMANode)
}

// unreadable says why configuration space facts are missing: the reader was
// not root, or (as root) some functions' config could not be read or decoded.
func (f *Facts) unreadable() string {
	if f.PrivilegeKnown && !f.Privileged {
		return "extended config space is unreadable without root"
	}
	return "some functions' config space could not be read or decoded"
}

// bridgeWhat describes a bridge: its port type and vendor:device.
func bridgeWhat(d *pcie.Device) string {
	s := fmt.Sprintf("[%04x:%04x]", d.Vendor, d.Device)
	if t, ok := d.PortType(); ok {
		s = t.String() + " " + s
	}
	return s
}

// checkPCIeLink judges, for every GPU, RDMA NIC and NVMe controller and every
// link on the paths between them, whether the link runs below what both of its
// ends support (pcie.LinkBelowBothEnds: the rule of the kernel's link report,
// drivers/pci/pci.c pcie_print_link_status()). Each physical link is judged
// once, from its lower end (an endpoint or a switch upstream port) against the
// port above it; root and downstream ports are judged from below. A narrower
// link is always a warning; a slower one below a GPU is explained as the GPU's
// idle power saving (GPUs drop their link generation when idle) and should be
// re-checked under load; a GPU or NIC whose port tops out below the card's own
// capability is the link the kernel reports as "limited by" that port. A link
// whose state could not be read is unknown and names the files to read. In a
// VM the links are the virtual topology's.
func checkPCIeLink(f *Facts) Result {
	r := Result{Refs: []string{docRef("pcie_link"), "linux drivers/pci/pci.c pcie_print_link_status(), pcie_bandwidth_available()",
		refSysfs + " (current_link_speed, current_link_width, max_link_speed, max_link_width)"}}
	devs := f.pathDevices()
	if len(devs) == 0 {
		r.Status, r.Summary = Skip, "no GPU, NIC or NVMe controller"
		return r
	}
	downstream := map[*pcie.Device]bool{}
	for _, sw := range f.Node.Topology.Switches {
		for _, d := range sw.Downstream {
			downstream[d] = true
		}
	}
	blocks := f.pathBlocks()
	r.Status = Pass
	known := 0
	var unknown []string
	for _, d := range devs {
		if d.IsVF() || downstream[d] || (d.IsBridge() && d.Parent == nil) {
			continue // a VF shares its PF's link; a root or downstream port's link is judged from below
		}
		if pt, ok := d.PortType(); ok && (pt == pcie.PortRootPort || pt == pcie.PortDownstream) {
			continue
		}
		b, ok := pcie.LinkBelowBothEnds(d)
		if !ok {
			if !hasNoLink(d) {
				unknown = append(unknown, d.Address.String())
				r.addBlocks(blocks[d]...)
				r.Findings = append(r.Findings, Finding{Subject: d.Address.String(), Status: Unknown,
					Message: kind(d) + " link state or its port's maximum could not be read"})
			}
			continue
		}
		known++
		st, msg := judgeLink(d, b)
		src := "/sys/bus/pci/devices/" + d.Address.String() + "/{current,max}_link_{speed,width}"
		val := b.Current.String() + " (max " + b.Max.String() + ")"
		if b.Port.Known() {
			val += ", port max " + b.Port.String()
		}
		if st == Pass {
			if d.IsGPU() {
				r.Evidence = append(r.Evidence, Evidence{Source: src, Value: val})
			}
			continue
		}
		r.Status = worse(r.Status, st)
		r.Subjects = append(r.Subjects, d.Address.String())
		r.Findings = append(r.Findings, Finding{Subject: d.Address.String(), Status: st, Message: kind(d) + " " + msg})
		r.Evidence = append(r.Evidence, Evidence{Source: src, Value: val})
	}
	switch {
	case known == 0 && len(unknown) == 0:
		r.Status, r.Summary = Skip, "no PCI Express link on the peer paths"
		return r
	case len(unknown) > 0:
		r.Status = Unknown
		r.Summary = fmt.Sprintf("the state of %d link(s) on peer paths could not be read", len(unknown))
		if n := len(r.Subjects); n > 0 {
			r.Summary += fmt.Sprintf("; %d of the %d known run below what both ends support", n, known)
		}
		r.Subjects = append(r.Subjects, unknown...)
		r.Remediation = []string{"read current_link_speed, current_link_width, max_link_speed and max_link_width of " + strings.Join(unknown, ", ") +
			" and of the ports above them in /sys/bus/pci/devices/ (world-readable; absent from this capture), or run p2pcheck as root (CAP_SYS_ADMIN) to read LnkSta and LnkCap from config space"}
	case r.Status == Pass:
		r.Summary = fmt.Sprintf("%d links run at the best both ends support", known)
		if g := gpuLinks(f); g != "" {
			r.Summary += "; GPUs at " + g
		}
	default:
		r.Summary = fmt.Sprintf("%d of %d links run below what both ends support, or their port caps them", len(r.Subjects), known)
		r.Expected = "current speed and width equal to the lower maximum of both ends, under load"
		r.Remediation = []string{"re-check under load (e.g. during a copy); if still degraded, reseat the card, remove risers, check BIOS link speed and bifurcation"}
	}
	if f.Hypervisor() {
		r.Summary += " (virtual topology: the host's physical links may differ)"
	}
	return r
}

// hasNoLink reports whether d is known to have no PCI Express link: its
// capability list was read and holds no PCI Express capability (conventional
// PCI), or one without a link (a root complex integrated endpoint or event
// collector). The link attributes exist only for PCI Express functions
// (drivers/pci/pci-sysfs.c pcie_dev_attrs_are_visible).
func hasNoLink(d *pcie.Device) bool {
	c := d.Config
	return c != nil && c.CapsKnown && (c.Express == nil || !c.Express.HasLink)
}

// judgeLink words the verdict on the link above d.
func judgeLink(d *pcie.Device, b pcie.BothEnds) (st Status, msg string) {
	switch {
	case b.WidthBelow():
		return Warn, fmt.Sprintf("trained at %s, both ends support %s: width lost (reseat the card, check the riser and the BIOS lane bifurcation)", b.Current, b.Best)
	case b.SpeedBelow() && d.IsGPU():
		return Warn, fmt.Sprintf("running %s, both ends support %s: an idle GPU lowers its link speed to save power; re-check under load before acting", b.Current, b.Best)
	case b.SpeedBelow():
		return Warn, fmt.Sprintf("trained at %s, both ends support %s: speed lost (reseat, check risers and retimers)", b.Current, b.Best)
	case b.PortLimits() && (d.IsGPU() || d.IsNIC()):
		return Warn, fmt.Sprintf("capable of %s but its port %s tops out at %s: the slot caps the link", b.Max, d.Parent.Address, b.Port)
	}
	return Pass, ""
}

// gpuLinks counts the GPUs' current links for a passing result: "8x Gen5 x16".
func gpuLinks(f *Facts) string {
	counts := map[string]int{}
	var order []string
	for _, g := range f.GPUs() {
		if !g.Link().Current.Known() {
			continue
		}
		l := g.Link().Current.String()
		if counts[l] == 0 {
			order = append(order, l)
		}
		counts[l]++
	}
	parts := make([]string, len(order))
	for i, l := range order {
		parts[i] = fmt.Sprintf("%dx %s", counts[l], l)
	}
	return strings.Join(parts, ", ")
}

// checkAER judges the AER error counters of the functions on peer paths
// (aer_dev_correctable, aer_dev_nonfatal, aer_dev_fatal: drivers/pci/pcie/aer.c
// aer_stats_attrs, since Linux 4.19 for every AER-capable function, whoever
// owns AER). The counters are cumulative since boot, so an old burst says
// little: with the previous run's counts (Inputs.AER.Previous, from the
// --prometheus textfile) the check judges their growth, where any new
// uncorrectable error fails and correctable ones warn from the threshold up;
// without them it can only warn, once a count since boot reaches its
// threshold. A link that retrains or replays shows there first; Xid 79 follows
// fatal errors.
func checkAER(f *Facts) Result {
	r := Result{Status: Skip, Refs: []string{docRef("aer_errors"), "linux drivers/pci/pcie/aer.c aer_stats_attrs", "linux Documentation/PCI/pcieaer-howto.rst",
		"linux Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats"}}
	devs := f.pathDevices()
	if len(devs) == 0 {
		r.Summary = "no GPU, NIC or NVMe controller"
		return r
	}
	th := f.AER.threshold()
	blocks := f.pathBlocks()
	counted, compared := 0, 0
	var cor, nonFatal, fatal uint64
	for _, d := range devs {
		a := d.AER
		if a == nil {
			continue
		}
		counted++
		cor, nonFatal, fatal = cor+a.Correctable, nonFatal+a.NonFatal, fatal+a.Fatal
		subj := d.Address.String()
		st, msg := Pass, ""
		if prev, ok := f.AER.Previous[d.Address]; ok {
			compared++
			g := aerGrowth(*a, prev)
			switch {
			case g.Fatal > 0 || g.NonFatal > 0:
				st = Fail
			case g.Correctable >= th:
				st = Warn
			}
			msg = fmt.Sprintf("%d correctable, %d non-fatal, %d fatal new error(s) since the previous run (%d, %d, %d since boot)",
				g.Correctable, g.NonFatal, g.Fatal, a.Correctable, a.NonFatal, a.Fatal)
		} else {
			if a.Fatal > 0 || a.NonFatal > 0 || a.Correctable >= th {
				st = Warn
			}
			msg = fmt.Sprintf("%d correctable, %d non-fatal, %d fatal error(s) since boot, no previous run to compare with", a.Correctable, a.NonFatal, a.Fatal)
		}
		if st == Pass {
			continue
		}
		r.Subjects = append(r.Subjects, subj)
		r.Findings = append(r.Findings, Finding{Subject: subj, Status: st, Message: msg})
		r.Evidence = append(r.Evidence, Evidence{Source: "/sys/bus/pci/devices/" + subj + "/aer_dev_{correctable,nonfatal,fatal}",
			Value: fmt.Sprintf("TOTAL_ERR_COR %d, TOTAL_ERR_NONFATAL %d, TOTAL_ERR_FATAL %d", a.Correctable, a.NonFatal, a.Fatal)})
		if st == Fail {
			r.addBlocks(blocks[d]...)
		}
		r.Status = worse(r.Status, st)
	}
	if counted == 0 {
		r.Summary = "no AER error counters on the functions of peer paths (no AER capability, a kernel before 4.19, or one built without CONFIG_PCIEAER)"
		return r
	}
	r.Observed = fmt.Sprintf("%d correctable, %d non-fatal, %d fatal error(s) since boot on %d function(s) with counters; %d compared with the previous run",
		cor, nonFatal, fatal, counted, compared)
	r.Expected = fmt.Sprintf("no new uncorrectable error since the previous run and fewer than %d new correctable ones (without a previous run: since boot)", th)
	switch r.Status {
	case Skip:
		r.Status = Pass
		r.Summary = fmt.Sprintf("no AER errors worth attention on the %d function(s) of peer paths", counted)
		if compared < counted {
			r.Summary += fmt.Sprintf(" (%d judged on counts since boot: pass --prometheus FILE on every run to judge growth)", counted-compared)
		}
	case Warn:
		r.Summary = fmt.Sprintf("PCIe errors on %d function(s) of peer paths", len(r.Subjects))
		r.Remediation = []string{"check dmesg for AER reports; if the counts keep growing, reseat or replace the card or riser and check the slot's link (p2pcheck topo); run p2pcheck with --prometheus FILE each time to judge growth between runs"}
	case Fail:
		r.Summary = fmt.Sprintf("new uncorrectable PCIe errors on %d function(s) of peer paths since the previous run", len(r.Subjects))
		r.Remediation = []string{"uncorrectable errors corrupt or drop transfers: check dmesg for AER and Xid 79 reports, then reseat or replace the card; do not run P2P workloads on this path until the counts stop growing"}
	}
	return r
}

// checkNUMANode flags GPUs and NICs whose numa_node is -1 on a machine with more
// than one NUMA node: the firmware gave no proximity (ACPI _PXM), so NCCL, which
// places its CPU nodes by numa_node, and CPU pinning cannot place work next to
// the device (drivers/pci/pci-sysfs.c numa_node_show). On a single-node machine
// and in VMs -1 is normal. A numa_node file missing on some functions while
// others have one is unknown; missing everywhere means a kernel without NUMA.
func checkNUMANode(f *Facts) Result {
	r := Result{Refs: []string{docRef("numa_node"), "linux drivers/pci/pci-sysfs.c numa_node_show", refSysfs + " (numa_node)"}}
	nodes := map[int]bool{}
	anyAttr := false
	for _, d := range f.Node.Topology.Devices {
		if d.NUMANode != nil {
			anyAttr = true
			if *d.NUMANode >= 0 {
				nodes[*d.NUMANode] = true
			}
		}
	}
	devs := slices.Concat(f.GPUs(), f.NICs())
	if len(devs) == 0 {
		r.Status, r.Summary = Skip, "no GPU or NIC"
		return r
	}
	if !anyAttr {
		r.Status, r.Summary = Skip, "no PCI function has a numa_node file: a kernel built without NUMA"
		return r
	}
	var missing, absent []string
	for _, d := range devs {
		v := "absent"
		if d.NUMANode != nil {
			v = strconv.Itoa(*d.NUMANode)
		}
		r.Evidence = append(r.Evidence, Evidence{Source: "/sys/bus/pci/devices/" + d.Address.String() + "/numa_node", Value: v})
		switch {
		case d.NUMANode == nil:
			absent = append(absent, d.Address.String())
		case *d.NUMANode < 0:
			missing = append(missing, d.Address.String())
		}
	}
	r.Observed = fmt.Sprintf("%d NUMA node(s) seen on PCI functions; %d of %d GPUs/NICs with numa_node -1, %d without the file", len(nodes), len(missing), len(devs), len(absent))
	switch {
	case len(missing) > 0 && len(nodes) > 1:
		r.Status = Warn
		r.Summary = fmt.Sprintf("%d GPU(s)/NIC(s) have numa_node -1 on a multi-node machine", len(missing))
		r.Subjects = missing
		r.Expected = "numa_node >= 0 on every GPU and NIC"
		r.Remediation = []string{"update the BIOS/ACPI tables (_PXM, SRAT) or enable NUMA (sub-NUMA clustering settings) in the BIOS; meanwhile pin with NVML CPU affinity"}
	case len(absent) > 0:
		r.Status = Unknown
		r.addBlocks(CapGDR)
		r.Summary = fmt.Sprintf("numa_node could not be read for %d GPU(s)/NIC(s)", len(absent))
		r.Subjects = absent
		r.Remediation = []string{"read /sys/bus/pci/devices/<bdf>/numa_node of " + strings.Join(absent, ", ") + " (world-readable; absent from this capture)"}
	case len(missing) > 0 && f.Hypervisor():
		r.Status, r.Summary = Pass, "numa_node -1 in a VM: the hypervisor exposes no NUMA proximity (virtual topology)"
	case len(missing) > 0:
		r.Status, r.Summary = Pass, "numa_node -1 on a machine with no second NUMA node seen"
	default:
		r.Status, r.Summary = Pass, "every GPU and NIC has a NUMA node"
	}
	return r
}

// graceC2C reports whether GPU d is a Grace superchip's GPU, joined to its CPU
// by NVLink-C2C: an NVIDIA GPU on an arm64 host that NVML names GH200, GB200 or
// GB300, or whose device ID is one of those parts' (GH200 0x2342 and 0x2348,
// GB200 0x2941).
func (f *Facts) graceC2C(d *pcie.Device) bool {
	if d.Vendor != pcie.VendorNVIDIA || !f.Arm64() {
		return false
	}
	if g := f.nvmlGPU(d.Address); g != nil {
		for _, n := range []string{"GH200", "GB200", "GB300"} {
			if strings.Contains(g.Name, n) {
				return true
			}
		}
	}
	return slices.Contains([]uint16{0x2342, 0x2348, 0x2941}, d.Device)
}

// nvlinked reports whether NVML lists an active NVLink between GPUs a and b;
// known is false without NVML facts for both.
func (f *Facts) nvlinked(a, b *pcie.Device) (linked, known bool) {
	ga, gb := f.nvmlGPU(a.Address), f.nvmlGPU(b.Address)
	if ga == nil || gb == nil || ga.NVLink == nil {
		return false, false
	}
	for _, l := range ga.NVLink.Links {
		if l.Remote != nil && *l.Remote == b.Address {
			return true, true
		}
	}
	return false, true
}

// checkGPUNICAffinity classifies, for every GPU, the path to its nearest RDMA
// NIC as NCCL does (pathclass.NCCL), with both NUMA nodes, and warns when NCCL
// would not use GPUDirect RDMA for it by default (ncclTopoCheckGdr in NVIDIA/nccl
// src/graph/paths.cc): then NCCL stages RDMA through host memory. NCCL's
// default cut-off is PXB (NCCL_NET_GDR_LEVEL); two routes reach farther NICs:
//
//   - On a Grace superchip (NVLink-C2C between GPU and CPU), NCCL 2.27 and later
//     classes a NIC on the GPU's CPU as P2C and allows GPUDirect RDMA there by
//     default (NCCL_NET_GDR_C2C=1).
//   - PXN: a NIC within PXB of another GPU that is NVLink-connected to this one
//     is reached through that GPU, over NVLink then PCIe (NCCL_PXN_DISABLE=1
//     turns it off); NCCL then judges the other GPU's distance.
func checkGPUNICAffinity(f *Facts) Result {
	r := Result{Refs: []string{docRef("gpu_nic_affinity"), "NVIDIA/nccl src/graph/paths.cc ncclTopoCheckGdr, ncclTopoComputePaths (PXN, P2C)",
		"https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html (NCCL_NET_GDR_LEVEL, NCCL_NET_GDR_C2C, NCCL_PXN_DISABLE)"}}
	gpus, nics := f.GPUs(), f.NICs()
	if len(gpus) == 0 || len(nics) == 0 {
		r.Status, r.Summary = Skip, "needs at least one GPU and one NIC"
		return r
	}
	r.Status = Pass
	var classes, unknown []string
	near := make([]nearNIC, len(gpus))
	var relays []int // the GPUs with a NIC within NCCL's default reach, PXN's candidates
	for i, g := range gpus {
		near[i].nic, near[i].res = nearestNIC(g, nics)
		if pathclass.NCCLGDRByDefault(near[i].res.Class) {
			relays = append(relays, i)
		}
	}
	for i, g := range gpus {
		best, bestRes := near[i].nic, near[i].res
		classes = append(classes, fmt.Sprintf("%s (NUMA %s)->%s (NUMA %s) %s", g.Address, numaString(g), label(best), numaString(best), bestRes))
		if pathclass.NCCLGDRByDefault(bestRes.Class) {
			continue
		}
		subj := g.Address.String()
		if bestRes.Class == pathclass.Unknown {
			unknown = append(unknown, subj)
			r.Findings = append(r.Findings, Finding{Subject: subj, Status: Unknown, Message: "path class unknown: " + bestRes.Note})
			continue
		}
		if bestRes.Class == pathclass.PHB && f.graceC2C(g) {
			r.Findings = append(r.Findings, Finding{Subject: subj, Status: Pass,
				Message: fmt.Sprintf("nearest %s is PHB through the Grace CPU: NCCL 2.27 and later classes it P2C (NVLink-C2C) and uses GPUDirect RDMA by default (NCCL_NET_GDR_C2C=1); older NCCL stages through host memory", label(best))})
			continue
		}
		msg := fmt.Sprintf("nearest %s is %s: farther than PXB, NCCL will not use GPUDirect RDMA by default", label(best), bestRes)
		if gn, nn := numaString(g), numaString(best); gn != nn {
			msg += fmt.Sprintf("; GPU on NUMA node %s, NIC on %s", gn, nn)
		}
		if h, n, linked, known := f.pxnRelay(g, gpus, near, relays); h != nil {
			switch {
			case linked:
				r.Findings = append(r.Findings, Finding{Subject: subj, Status: Pass,
					Message: fmt.Sprintf("nearest %s is %s, but NCCL reaches %s through NVLink-connected GPU %s (PXN; NCCL_PXN_DISABLE=1 turns it off)", label(best), bestRes, label(n), h.Address)})
				continue
			case !known:
				msg += fmt.Sprintf("; if GPU %s is NVLink-connected to it, NCCL reaches %s through it (PXN), but NVLink is unknown without NVML", h.Address, label(n))
			}
		}
		r.Status = worse(r.Status, Warn)
		r.Subjects = append(r.Subjects, subj)
		r.Findings = append(r.Findings, Finding{Subject: subj, Status: Warn, Message: msg})
	}
	r.Observed = strings.Join(classes, "; ")
	r.Expected = "PIX or PXB to at least one NIC per GPU (P2C on Grace with NCCL 2.27+, or a NIC reached by PXN)"
	switch {
	case len(unknown) > 0:
		r.Status = Unknown
		r.addBlocks(CapGDR)
		r.Summary = fmt.Sprintf("the path class from %d GPU(s) to their NICs could not be determined", len(unknown))
		r.Subjects = append(r.Subjects, unknown...)
		r.Remediation = []string{f.seeConfig("the PCI Express port types that place switches")}
	case r.Status == Pass:
		r.Summary = fmt.Sprintf("NCCL uses GPUDirect RDMA by default for every GPU (%d GPUs, %d NICs)", len(gpus), len(nics))
		r.Subjects = nil
	default:
		r.Summary = fmt.Sprintf("%d GPU(s) have no NIC within NCCL's default GPUDirect RDMA reach: RDMA staged through host memory", len(r.Subjects))
		r.Remediation = []string{"place a NIC under the same PCIe switch as each GPU, or accept host-staged RDMA; NCCL_NET_GDR_LEVEL=PHB (or SYS) forces GPUDirect RDMA at a bandwidth cost"}
	}
	if f.Hypervisor() {
		r.Summary += " (virtual topology)"
	}
	return r
}

// nearestNIC returns the NIC nearest to g by NCCL's path class.
func nearestNIC(g *pcie.Device, nics []*pcie.Device) (*pcie.Device, pathclass.Result) {
	var best *pcie.Device
	var bestRes pathclass.Result
	for _, n := range nics {
		res := pathclass.NCCL(g, n)
		if best == nil || (res.Class != pathclass.Unknown && (bestRes.Class == pathclass.Unknown || res.Class < bestRes.Class)) {
			best, bestRes = n, res
		}
	}
	return best, bestRes
}

// nearNIC is a GPU's nearest NIC and NCCL's path class to it.
type nearNIC struct {
	nic *pcie.Device
	res pathclass.Result
}

// pxnRelay finds another GPU h with a NIC n within PXB, the relay NCCL's PXN
// would use for g (src/graph/paths.cc ncclTopoComputePaths: the NIC's local
// GPU, NVLink-connected to g, within PXB of the NIC): the first such GPU that is
// NVLink-connected to g, else the first such GPU. near holds the nearest NIC of
// each of gpus and relays the indices of those with one within PXB. linked and
// known are nvlinked(g, h). h is nil when there is no candidate.
func (f *Facts) pxnRelay(g *pcie.Device, gpus []*pcie.Device, near []nearNIC, relays []int) (h, n *pcie.Device, linked, known bool) {
	ng := f.nvmlGPU(g.Address)
	for _, i := range relays {
		c := gpus[i]
		if c == g {
			continue
		}
		l, k := f.nvlinked(g, c)
		if l || h == nil {
			h, n, linked, known = c, near[i].nic, l, k
		}
		if l || ng == nil || ng.NVLink == nil {
			return // without g's NVLink facts no other candidate is linked
		}
	}
	return
}

// checkBARSizes checks each NVIDIA GPU's BAR1, the aperture through which peers,
// NICs and GDRCopy reach its memory. BAR1 is the first memory BAR after BAR0
// (resource 1, or resource 2 when BAR0 is 64-bit, as on H100/H200). It fails when
// BAR1 is unassigned ("can't assign; no space"), and warns when it is smaller
// than the framebuffer (NVML), nearly used up, or when Resizable BAR could make
// it larger and nothing shows that it already covers the framebuffer. The
// resize file is named by BAR index: resourceN_resize
// (Documentation/ABI/testing/sysfs-bus-pci; drivers/pci/pci-sysfs.c). A GPU
// whose resource file lines up to BAR1 did not parse has an unknown BAR1.
func checkBARSizes(f *Facts) Result {
	r := Result{Refs: []string{docRef("bar_sizes"), "https://docs.nvidia.com/cuda/gpudirect-rdma/ (Displaying GPU BAR space)",
		"linux drivers/pci/rebar.c", refSysfs + " (resource, resourceN_resize)"}}
	gpus := f.NVIDIAGPUs()
	if len(gpus) == 0 {
		r.Status, r.Summary = Skip, "no NVIDIA GPU"
		return r
	}
	r.Status = Pass
	var sizes, unknown []string
	rebarUnknown := 0
	for _, g := range gpus {
		s := g.Address.String()
		bar, ok := BAR1(g)
		if why := bar1Unread(g, bar, ok); why != "" {
			unknown = append(unknown, s)
			r.Findings = append(r.Findings, Finding{Subject: s, Status: Unknown, Message: "BAR1 unknown: " + why})
			continue
		}
		if !ok {
			r.Status = worse(r.Status, Fail)
			r.Subjects = append(r.Subjects, s)
			r.Findings = append(r.Findings, Finding{Subject: s, Status: Fail, Message: "BAR1 has no address assigned: the firmware could not fit it"})
			r.Remediation = appendOnce(r.Remediation, "enable Above 4G Decoding (and Resizable BAR) in the BIOS; check dmesg for \"BAR 1 ... can't assign; no space\"")
			continue
		}
		r.Evidence = append(r.Evidence, Evidence{Source: "/sys/bus/pci/devices/" + s + "/resource line " + fmt.Sprint(bar.Index), Value: fmt.Sprintf("0x%016x 0x%016x 0x%016x", bar.Start, bar.End, bar.Flags)})
		size := bar.Size()
		desc := bytesize.Format(size)
		var msgs []string
		st := Pass
		ng := f.nvmlGPU(g.Address)
		var fb *uint64 // framebuffer size, nil when unknown
		if ng != nil {
			fb = ng.MemoryTotal
		}
		if g.Config == nil || !g.Config.ExtCapsKnown {
			rebarUnknown++
		} else {
			for _, rb := range g.Config.ReBAR {
				if rb.BAR != bar.Index || len(rb.Supported) == 0 {
					continue
				}
				maxSize := rb.Supported[len(rb.Supported)-1]
				desc += fmt.Sprintf(" (ReBAR current %s, max %s)", bytesize.Format(rb.Current), bytesize.Format(maxSize))
				if rb.Current >= maxSize {
					continue
				}
				if fb != nil && rb.Current >= *fb {
					desc += ", covers the framebuffer"
					continue
				}
				st = worse(st, Warn)
				m := fmt.Sprintf("Resizable BAR allows %s but BAR1 is %s", bytesize.Format(maxSize), bytesize.Format(rb.Current))
				if fb == nil {
					m += "; whether it already covers the framebuffer is unknown without NVML's memory size"
				}
				msgs = append(msgs, m)
				r.Remediation = appendOnce(r.Remediation, "enable Resizable BAR and Above 4G Decoding in the BIOS, or resize at run time with the driver unbound: "+resizeCommand(g.Address, bar.Index, maxSize))
			}
		}
		if ng != nil {
			if ng.BAR1Total != nil && ng.BAR1Used != nil {
				desc += fmt.Sprintf(", NVML used %s of %s", bytesize.Format(*ng.BAR1Used), bytesize.Format(*ng.BAR1Total))
				r.Evidence = append(r.Evidence, Evidence{Source: "nvmlDeviceGetBAR1MemoryInfo(" + s + ")", Value: fmt.Sprintf("total=%d used=%d", *ng.BAR1Total, *ng.BAR1Used)})
				if *ng.BAR1Total > 0 && *ng.BAR1Used*10 >= *ng.BAR1Total*9 {
					st = worse(st, Warn)
					msgs = append(msgs, "BAR1 is at least 90% used: new GPUDirect and GDRCopy mappings will fail")
				}
			}
			if fb != nil && size < *fb {
				st = worse(st, Warn)
				msgs = append(msgs, fmt.Sprintf("BAR1 %s is smaller than the %s framebuffer: peers and NICs see only part of it", bytesize.Format(size), bytesize.Format(*fb)))
			}
		} else if size <= 256<<20 {
			st = worse(st, Warn)
			msgs = append(msgs, "BAR1 of 256 MiB or less limits GPUDirect RDMA registrations and GDRCopy mappings")
		}
		sizes = append(sizes, s+" "+desc)
		if st != Pass {
			r.Status = worse(r.Status, st)
			r.Subjects = append(r.Subjects, s)
			r.Findings = append(r.Findings, Finding{Subject: s, Status: st, Message: strings.Join(msgs, "; ")})
		}
	}
	if len(sizes) > 0 {
		r.Observed = "BAR1 " + strings.Join(sizes, "; ")
	}
	if r.Status == Fail || len(unknown) > 0 {
		r.addBlocks(CapP2P, CapGDR, CapGDRCopy)
	}
	switch {
	case r.Status == Fail:
		r.Summary = fmt.Sprintf("BAR1 problem on %d of %d GPU(s)", len(r.Subjects), len(gpus))
		if len(unknown) > 0 {
			r.Summary += fmt.Sprintf("; %d more unknown", len(unknown))
		}
	case len(unknown) > 0:
		r.Status = Unknown
		r.Summary = fmt.Sprintf("BAR1 of %d of %d GPU(s) could not be read", len(unknown), len(gpus))
		if n := len(r.Subjects); n > 0 {
			r.Summary += fmt.Sprintf("; a problem on %d more", n)
		}
		r.Subjects = append(r.Subjects, unknown...)
		r.Remediation = append([]string{"read /sys/bus/pci/devices/<bdf>/resource of " + strings.Join(unknown, ", ") + " (world-readable; lines that did not parse are named in the warnings)"}, r.Remediation...)
	case r.Status == Pass:
		r.Summary = fmt.Sprintf("BAR1 of %d GPU(s) assigned", len(gpus))
		if rebarUnknown > 0 {
			r.Summary += "; Resizable BAR unknown without root"
		}
	default:
		r.Summary = fmt.Sprintf("BAR1 problem on %d of %d GPU(s)", len(r.Subjects), len(gpus))
	}
	return r
}

// bar1Unread says why g's BAR1 is unknown, or "" when it is known: the resource
// file was not read at all, or a line that could hold BAR1 did not parse (a line
// from 1 up to the BAR1 found; when none was found, any line: the parser drops
// unused lines, so a damaged file cannot show that lines 1 to 5 were there).
func bar1Unread(g *pcie.Device, bar pcie.Resource, found bool) string {
	if len(g.Resources) == 0 && len(g.ResourcesUnread) == 0 {
		return "the resource file was not read"
	}
	var lines []string
	for _, i := range g.ResourcesUnread {
		if !found || (i >= 1 && i <= bar.Index) {
			lines = append(lines, strconv.Itoa(i))
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return "resource line(s) " + strings.Join(lines, ", ") + " did not parse"
}

// resizeCommand is the run-time resize of BAR index bar of the function at a to
// size bytes: the size is written to resource<bar>_resize as log2 of the size in
// MiB (Documentation/ABI/testing/sysfs-bus-pci, resourceN_resize).
func resizeCommand(a pcie.Address, bar int, size uint64) string {
	return fmt.Sprintf("echo %d > /sys/bus/pci/devices/%s/resource%d_resize", bits.Len64(size>>20)-1, a, bar)
}

// BAR1 returns what NVIDIA calls a GPU's BAR1: the first memory BAR in use after
// BAR0. BAR0 takes two BAR registers when it is 64-bit, so BAR1 is then resource 2.
func BAR1(d *pcie.Device) (pcie.Resource, bool) {
	for _, b := range d.BARs() {
		if b.Index >= 1 && b.IsMem() {
			return b, true
		}
	}
	return pcie.Resource{}, false
}

func appendOnce(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

func sortedKeys[V any](m map[pcie.Address]V) []pcie.Address {
	out := make([]pcie.Address, 0, len(m))
	for a := range m {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b pcie.Address) int { return a.Compare(b) })
	return out
}

// setpciAll joins the setpci commands of every bridge into one command line: a
// shell loop when they differ only in the address, as p2pdma.Fix writes them.
func setpciAll(addrs []pcie.Address, cmds map[pcie.Address]string) string {
	if len(addrs) == 1 {
		return cmds[addrs[0]]
	}
	var rest string
	loop := true
	for i, a := range addrs {
		f := strings.Fields(cmds[a])
		if len(f) < 4 || f[0] != "setpci" || f[1] != "-s" || f[2] != a.String() {
			loop = false
			break
		}
		r := strings.Join(f[3:], " ")
		if i > 0 && r != rest {
			loop = false
			break
		}
		rest = r
	}
	if !loop {
		all := make([]string, len(addrs))
		for i, a := range addrs {
			all[i] = cmds[a]
		}
		return strings.Join(all, " && ")
	}
	names := make([]string, len(addrs))
	for i, a := range addrs {
		names[i] = a.String()
	}
	return "for b in " + strings.Join(names, " ") + "; do setpci -s $b " + rest + "; done"
}
