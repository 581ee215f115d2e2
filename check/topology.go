package check

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pathclass"
	"github.com/p2pkit/p2pkit/pcie"
)

// References shared by several checks.
const (
	refF1      = "field-checks.md F1 (ACS on switches and root ports)"
	refF2      = "field-checks.md F2 (IOMMU in translation mode)"
	refF4      = "field-checks.md F4 (virtual machines)"
	refF5      = "field-checks.md F5 (BAR1, Resizable BAR)"
	refF6      = "field-checks.md F6 (link trained below max)"
	refF11     = "field-checks.md F11 (GPU-NIC NUMA and PCIe distance)"
	refP2PDMA  = "linux drivers/pci/p2pdma.c calc_map_type_and_dist()"
	refACSRedi = "linux drivers/pci/pci.c pci_disable_acs_redir()"
)

const noPairs = "fewer than two GPUs, NICs or NVMe controllers: no peer-to-peer pair to judge"

// checkReachability reports the pairs the kernel's P2PDMA code refuses
// (not-supported): peers under host bridges the kernel does not whitelist, or
// below different root complexes without the AMD Zen rule
// (drivers/pci/p2pdma.c calc_map_type_and_dist, cpu_supports_p2pdma). It is the
// first gate for the kernel's P2PDMA users (NVMe p2pmem and CMB, RDMA on p2pdma
// pages): a refused pair with an NVMe controller, a NIC or a p2pmem provider
// warns. GPU-to-GPU pairs are listed but only informational, since NVIDIA GPUs
// copy peer-to-peer on the NVIDIA driver's own decision (nvml_p2p_status).
func checkReachability(f *Facts) Result {
	r := Result{Refs: []string{refP2PDMA, "field-checks.md F12 (CPU and host-bridge limits)"}}
	if !f.hasPairs() {
		r.Status, r.Summary = Skip, noPairs
		return r
	}
	sc := f.scan()
	counts, refusedGPU, npairs := sc.counts, sc.refusedGPU, sc.n
	r.Status = Pass
	if counts[p2pdma.NotSupported] > refusedGPU {
		r.Status = Warn
	}
	r.Findings, r.Subjects = slices.Clone(sc.reach.Findings), slices.Clone(sc.reach.Subjects)
	r.Observed = mapTypeCounts(counts)
	r.Expected = "bus-addr or thru-host-bridge for every pair with an NVMe controller, NIC or p2pmem provider"
	refused := counts[p2pdma.NotSupported] - refusedGPU
	switch {
	case refused > 0:
		r.Summary = fmt.Sprintf("the kernel refuses P2PDMA for %d pair(s) with an NVMe controller, NIC or p2pmem provider", refused)
		r.Remediation = []string{
			"place peers below one PCIe switch or one root complex, or use a CPU/host bridge the kernel whitelists (drivers/pci/p2pdma.c pci_p2pdma_whitelist)",
		}
	case counts[p2pdma.Unknown] > 0:
		r.Status = Skip
		r.Summary = fmt.Sprintf("%d of %d verdicts depend on ACS state that could not be read (%s); the other %d are known",
			counts[p2pdma.Unknown], npairs, f.unreadable(), npairs-counts[p2pdma.Unknown])
	case refusedGPU > 0:
		r.Summary = fmt.Sprintf("the kernel refuses P2PDMA only between GPUs (%d pair(s)); GPU copies follow the NVIDIA driver's decision (nvml_p2p_status)", refusedGPU)
	default:
		r.Summary = fmt.Sprintf("the kernel allows P2PDMA for all %d pair(s): %s", npairs, r.Observed)
	}
	return r
}

func pairSubject(p pair) string { return p.a.Address.String() + "<->" + p.b.Address.String() }

func mapTypeCounts(c map[p2pdma.MapType]int) string {
	var parts []string
	for _, m := range []p2pdma.MapType{p2pdma.BusAddr, p2pdma.ThruHostBridge, p2pdma.NotSupported, p2pdma.Unknown} {
		if c[m] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c[m], m))
		}
	}
	return strings.Join(parts, ", ")
}

// checkACSPath finds bridges with ACS Request/Completion Redirect or Egress
// Control set between peers that share an upstream bridge (F1): the kernel then
// routes their traffic through the root complex, NCCL hangs or crawls and
// GPUDirect RDMA fails with local protection errors. It gives both fixes the
// kernel offers: the boot parameter pci=disable_acs_redir= and a setpci per
// bridge (drivers/pci/pci.c pci_disable_acs_redir; p2pdma.Fix). ACS that could
// not be read (no root) is skipped with the reason, never passed.
func checkACSPath(f *Facts) Result {
	r := Result{Refs: []string{refF1, refP2PDMA, refACSRedi, "nccl#2079", "NVIDIA/nccl troubleshooting: PCI Access Control Services"}}
	if !f.hasPairs() {
		r.Status, r.Summary = Skip, noPairs
		return r
	}
	sc := f.scan()
	bridges, setpci, unknown, unknownPairs, npairs := sc.bridges, sc.setpci, sc.unknown, sc.unknownPairs, sc.n
	addrs := sortedKeys(bridges)
	switch {
	case len(addrs) > 0:
		r.Status = Fail
		r.Summary = fmt.Sprintf("ACS redirect on %d bridge(s) between peers: their traffic is forced through the root complex", len(addrs))
		names := make([]string, len(addrs))
		for i, a := range addrs {
			d := f.Node.Topology.Device(a)
			acs, _ := d.ACS()
			names[i] = a.String()
			r.Subjects = append(r.Subjects, a.String())
			r.Findings = append(r.Findings, Finding{Subject: a.String(), Status: Fail,
				Message: fmt.Sprintf("%s, ACSCtl %s, on the path of %d pair(s), e.g. %s; fix: %s", bridgeWhat(d), pcie.ACSString(acs.Control), bridges[a].n, bridges[a].first, setpci[a])})
			r.Evidence = append(r.Evidence, Evidence{Source: "/sys/bus/pci/devices/" + a.String() + "/config ECAP_ACS+6.w", Value: fmt.Sprintf("%04x", acs.Control)})
		}
		r.Observed = "ACS redirect (RR/CR/EC) set on " + strings.Join(names, ", ")
		r.Expected = "no ACS redirect between peers below a common bridge"
		r.Remediation = append(r.Remediation, "kernel command line: \""+"pci=disable_acs_redir="+strings.Join(names, ";")+"\" (quote it: the ';' is part of it), or disable ACS in the BIOS")
		r.Remediation = append(r.Remediation, setpciAll(addrs, setpci)+" (at run time, lost at reboot)")
		if f.Hypervisor() {
			r.Remediation = append(r.Remediation, "in a VM, set ACS on the host for ATS instead of clearing it blindly (NVIDIA AI Enterprise VM appendix)")
		}
		if unknownPairs > 0 {
			r.Summary += fmt.Sprintf("; %d more pair(s) unknown", unknownPairs)
		}
	case unknownPairs > 0:
		r.Status = Skip
		r.Summary = fmt.Sprintf("ACS unknown on the paths of %d of %d pairs: %s", unknownPairs, npairs, f.unreadable())
		r.Subjects = unknown
		if !f.Privileged {
			r.Remediation = []string{"run p2pcheck as root (CAP_SYS_ADMIN) to read ACS Control"}
		}
	default:
		r.Status = Pass
		r.Summary = fmt.Sprintf("no ACS redirect between the %d peer pair(s)", npairs)
		r.Observed = "ACS redirect clear on every shared path"
	}
	return r
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

// checkPCIeLink compares, for every GPU, RDMA NIC and NVMe controller and every link
// on the paths between them, the link's current speed and width with the best
// both ends can do (F6). Each physical link is judged once, from its lower end
// (an endpoint or a switch upstream port) against the port above it. A narrower
// link is always a warning; a slower one below a GPU is explained as the GPU's
// idle power saving (GPUs drop their link generation when idle, Syllo/nvtop#6)
// and should be re-checked under load; a port slower than its device caps the
// link. In a VM the links are the virtual topology's.
func checkPCIeLink(f *Facts) Result {
	r := Result{Refs: []string{refF6, "linux Documentation/ABI/testing/sysfs-bus-pci (current_link_speed, max_link_speed)"}}
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
	r.Status = Pass
	known := 0
	for _, d := range devs {
		if d.IsVF() || downstream[d] || (d.IsBridge() && d.Parent == nil) {
			continue // a VF shares its PF's link; a root or downstream port's link is judged from below
		}
		st, msg, ok := judgeLink(d)
		if !ok {
			continue
		}
		known++
		l := d.Link()
		src := "/sys/bus/pci/devices/" + d.Address.String() + "/{current,max}_link_{speed,width}"
		if st == Pass {
			if d.IsGPU() {
				r.Evidence = append(r.Evidence, Evidence{Source: src, Value: l.Current.String() + " (max " + l.Max.String() + ")"})
			}
			continue
		}
		r.Status = worse(r.Status, st)
		r.Subjects = append(r.Subjects, d.Address.String())
		r.Findings = append(r.Findings, Finding{Subject: d.Address.String(), Status: st, Message: kind(d) + " " + msg})
		r.Evidence = append(r.Evidence, Evidence{Source: src, Value: l.Current.String() + " (max " + l.Max.String() + ")"})
	}
	switch {
	case known == 0:
		r.Status, r.Summary = Skip, "no link speed or width is known"
		return r
	case r.Status == Pass:
		r.Summary = fmt.Sprintf("%d links run at the best both ends can do", known)
		if g := gpuLinks(f); g != "" {
			r.Summary += "; GPUs at " + g
		}
	default:
		r.Summary = fmt.Sprintf("%d of %d links run below what both ends can do", len(r.Subjects), known)
		r.Expected = "current speed and width equal to the lower maximum of both ends, under load"
		r.Remediation = []string{"re-check under load (e.g. during a copy); if still degraded, reseat the card, remove risers, check BIOS link speed and bifurcation"}
	}
	if f.Hypervisor() {
		r.Summary += " (virtual topology: the host's physical links may differ)"
		r.Refs = append(r.Refs, refF4)
	}
	return r
}

// judgeLink judges the link above d against the port at its other end (its
// parent), or against d's own capability when it has none. ok is false when the
// link's current or maximum state is unknown.
func judgeLink(d *pcie.Device) (st Status, msg string, ok bool) {
	l := d.Link()
	if !l.Current.Known() || !l.Max.Known() {
		return Skip, "", false
	}
	best := l.Max
	var port pcie.Link
	if p := d.Parent; p != nil {
		if pl := p.Link(); pl.Max.Known() {
			port = pl.Max
			best.Speed = min(best.Speed, port.Speed)
			best.Width = min(best.Width, port.Width)
		}
	}
	switch {
	case l.Current.Width < best.Width:
		return Warn, fmt.Sprintf("trained at %s, both ends can do %s: width lost (reseat the card, check the riser and the BIOS lane bifurcation)", l.Current, best), true
	case l.Current.Speed < best.Speed && d.IsGPU():
		return Warn, fmt.Sprintf("running %s, both ends can do %s: an idle GPU lowers its link speed to save power; re-check under load before acting", l.Current, best), true
	case l.Current.Speed < best.Speed:
		return Warn, fmt.Sprintf("trained at %s, both ends can do %s: speed lost (reseat, check risers and retimers)", l.Current, best), true
	case port.Known() && (port.Speed < l.Max.Speed || port.Width < l.Max.Width) && (d.IsGPU() || d.IsNIC()):
		return Warn, fmt.Sprintf("capable of %s but its port %s tops out at %s: the slot caps the link", l.Max, d.Parent.Address, port), true
	}
	return Pass, "", true
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

// checkAER reads the AER error totals of the devices on peer paths (F15: errors on a
// GPU's bridge accompanied blocked P2P DMA; Xid 79 follows fatal ones). Fatal or
// uncorrectable non-fatal errors since boot fail, correctable ones warn: a link
// that retrains or replays shows there first. Without the aer_dev_* files (AER
// handled by the firmware, a kernel before 5.8, or no AER capability) it skips.
func checkAER(f *Facts) Result {
	r := Result{Status: Skip, Refs: []string{"field-checks.md F15 (PCIe/Xid error signals)", "linux Documentation/PCI/pcieaer-howto.rst",
		"linux drivers/pci/pcie/aer.c aer_stats_dev_attr"}}
	devs := f.pathDevices()
	if len(devs) == 0 {
		r.Summary = "no GPU, NIC or NVMe controller"
		return r
	}
	counted := 0
	var cor, nonFatal, fatal uint64
	for _, d := range devs {
		a := d.AER
		if a == nil {
			continue
		}
		counted++
		cor, nonFatal, fatal = cor+a.Correctable, nonFatal+a.NonFatal, fatal+a.Fatal
		st := Pass
		switch {
		case a.Fatal > 0 || a.NonFatal > 0:
			st = Fail
		case a.Correctable > 0:
			st = Warn
		default:
			continue
		}
		subj := d.Address.String()
		r.Subjects = append(r.Subjects, subj)
		r.Findings = append(r.Findings, Finding{Subject: subj, Status: st,
			Message: fmt.Sprintf("%d correctable, %d non-fatal, %d fatal error(s) since boot", a.Correctable, a.NonFatal, a.Fatal)})
		r.Evidence = append(r.Evidence, Evidence{Source: "/sys/bus/pci/devices/" + subj + "/aer_dev_{correctable,nonfatal,fatal}",
			Value: fmt.Sprintf("TOTAL_ERR_COR %d, TOTAL_ERR_NONFATAL %d, TOTAL_ERR_FATAL %d", a.Correctable, a.NonFatal, a.Fatal)})
		if st == Fail || r.Status != Fail {
			r.Status = st
		}
	}
	if counted == 0 {
		r.Summary = "no AER error counters on the functions of peer paths (no AER capability, AER owned by the firmware, or Linux before 5.8)"
		return r
	}
	r.Observed = fmt.Sprintf("%d correctable, %d non-fatal, %d fatal error(s) on %d function(s) with counters", cor, nonFatal, fatal, counted)
	r.Expected = "no AER errors on peer paths"
	switch r.Status {
	case Skip:
		r.Status = Pass
		r.Summary = fmt.Sprintf("no AER errors logged on the %d function(s) of peer paths", counted)
	case Warn:
		r.Summary = fmt.Sprintf("correctable PCIe errors on %d function(s) of peer paths", len(r.Subjects))
		r.Remediation = []string{"reseat or replace the card or riser, check the slot's link (p2pcheck topo), and watch whether the counts grow (Documentation/PCI/pcieaer-howto.rst)"}
	case Fail:
		r.Summary = fmt.Sprintf("uncorrectable PCIe errors on %d function(s) of peer paths", len(r.Subjects))
		r.Remediation = []string{"uncorrectable errors corrupt or drop transfers: check dmesg for AER and Xid 79 reports, then reseat or replace the card; do not run P2P workloads on this path until the counts stay at zero"}
	}
	return r
}

// checkNUMANode flags GPUs and NICs whose numa_node is -1 on a machine with more
// than one NUMA node: the firmware gave no proximity (_PXM), so NCCL and CPU
// pinning cannot place work next to the device (F11, tensorflow#58428). On a
// single-node machine and in VMs -1 is normal.
func checkNUMANode(f *Facts) Result {
	r := Result{Refs: []string{refF11, "linux drivers/pci/pci-sysfs.c numa_node_show"}}
	nodes := map[int]bool{}
	for _, d := range f.Node.Topology.Devices {
		if d.NUMANode != nil && *d.NUMANode >= 0 {
			nodes[*d.NUMANode] = true
		}
	}
	devs := slices.Concat(f.GPUs(), f.NICs())
	if len(devs) == 0 {
		r.Status, r.Summary = Skip, "no GPU or NIC"
		return r
	}
	var missing []string
	for _, d := range devs {
		v := "absent"
		if d.NUMANode != nil {
			v = strconv.Itoa(*d.NUMANode)
		}
		r.Evidence = append(r.Evidence, Evidence{Source: "/sys/bus/pci/devices/" + d.Address.String() + "/numa_node", Value: v})
		if d.NUMANode == nil || *d.NUMANode < 0 {
			missing = append(missing, d.Address.String())
		}
	}
	r.Observed = fmt.Sprintf("%d NUMA node(s) seen on PCI functions; %d of %d GPUs/NICs without one", len(nodes), len(missing), len(devs))
	switch {
	case len(missing) > 0 && len(nodes) > 1:
		r.Status = Warn
		r.Summary = fmt.Sprintf("%d GPU(s)/NIC(s) have numa_node -1 on a multi-node machine", len(missing))
		r.Subjects = missing
		r.Expected = "numa_node >= 0 on every GPU and NIC"
		r.Remediation = []string{"update the BIOS/ACPI tables (_PXM, SRAT) or enable NUMA (sub-NUMA clustering settings) in the BIOS; meanwhile pin with NVML CPU affinity"}
	case len(missing) > 0 && f.Hypervisor():
		r.Status, r.Summary = Pass, "numa_node -1 in a VM: the hypervisor exposes no NUMA proximity (virtual topology)"
	case len(missing) > 0:
		r.Status, r.Summary = Pass, "numa_node -1 on a machine with no second NUMA node seen"
	default:
		r.Status, r.Summary = Pass, "every GPU and NIC has a NUMA node"
	}
	return r
}

// checkGPUNICAffinity classifies, for every GPU, the path to its nearest RDMA NIC
// as NCCL does (pathclass.NCCL), with both NUMA nodes, and warns when it is
// farther than NCCL's default
// GPUDirect RDMA level PXB (NCCL_NET_GDR_LEVEL, src/graph/paths.cc): NCCL then
// silently stages RDMA through host memory (F11, nccl#1151).
func checkGPUNICAffinity(f *Facts) Result {
	r := Result{Refs: []string{refF11, "NVIDIA/nccl src/graph/paths.cc (NCCL_NET_GDR_LEVEL default PXB)", "nccl#1151"}}
	gpus, nics := f.GPUs(), f.NICs()
	if len(gpus) == 0 || len(nics) == 0 {
		r.Status, r.Summary = Skip, "needs at least one GPU and one NIC"
		return r
	}
	r.Status = Pass
	var classes []string
	for _, g := range gpus {
		var best *pcie.Device
		var bestRes pathclass.Result
		for _, n := range nics {
			res := pathclass.NCCL(g, n)
			if best == nil || (res.Class != pathclass.Unknown && (bestRes.Class == pathclass.Unknown || res.Class < bestRes.Class)) {
				best, bestRes = n, res
			}
		}
		classes = append(classes, fmt.Sprintf("%s (NUMA %s)->%s (NUMA %s) %s", g.Address, numaString(g), label(best), numaString(best), bestRes))
		if pathclass.NCCLGDRByDefault(bestRes.Class) {
			continue
		}
		st := Warn
		msg := fmt.Sprintf("nearest %s is %s: farther than PXB, NCCL will not use GPUDirect RDMA by default", label(best), bestRes)
		if gn, nn := numaString(g), numaString(best); gn != nn {
			msg += fmt.Sprintf("; GPU on NUMA node %s, NIC on %s", gn, nn)
		}
		if bestRes.Class == pathclass.Unknown {
			st, msg = Skip, "path class unknown: "+bestRes.Note
		}
		r.Status = worse(r.Status, st)
		r.Subjects = append(r.Subjects, g.Address.String())
		r.Findings = append(r.Findings, Finding{Subject: g.Address.String(), Status: st, Message: msg})
	}
	r.Observed = strings.Join(classes, "; ")
	r.Expected = "PIX or PXB to at least one NIC per GPU"
	switch r.Status {
	case Pass:
		r.Summary = fmt.Sprintf("every GPU has a NIC within PXB (%d GPUs, %d NICs)", len(gpus), len(nics))
		r.Subjects = nil
	case Warn:
		r.Summary = fmt.Sprintf("%d GPU(s) have no NIC within PXB: GPUDirect RDMA off by default", len(r.Subjects))
		r.Remediation = []string{"place a NIC under the same PCIe switch as each GPU, or accept host-staged RDMA; NCCL_NET_GDR_LEVEL=PHB (or SYS) forces GDR at a bandwidth cost"}
	default:
		r.Status, r.Summary = Skip, "path classes unknown"
	}
	if f.Hypervisor() {
		r.Summary += " (virtual topology)"
	}
	return r
}

// checkBARSizes checks each NVIDIA GPU's BAR1, the aperture through which peers,
// NICs and GDRCopy reach its memory (F5). BAR1 is the first memory BAR after BAR0
// (resource 1, or resource 2 when BAR0 is 64-bit, as on H100/H200). It fails when
// BAR1 is unassigned ("can't assign; no space"), warns when Resizable BAR could
// make it larger, when it is smaller than the framebuffer (NVML) or nearly used up.
func checkBARSizes(f *Facts) Result {
	r := Result{Refs: []string{refF5, "NVIDIA GPUDirect RDMA guide: Displaying GPU BAR space", "linux drivers/pci/rebar.c"}}
	gpus := f.NVIDIAGPUs()
	if len(gpus) == 0 {
		r.Status, r.Summary = Skip, "no NVIDIA GPU"
		return r
	}
	r.Status = Pass
	var sizes []string
	rebarUnknown := 0
	for _, g := range gpus {
		s := g.Address.String()
		bar, ok := BAR1(g)
		if !ok {
			r.Status = worse(r.Status, Fail)
			r.Subjects = append(r.Subjects, s)
			r.Findings = append(r.Findings, Finding{Subject: s, Status: Fail, Message: "BAR1 has no address assigned: the firmware could not fit it"})
			r.Remediation = appendOnce(r.Remediation, "enable Above 4G Decoding (and Resizable BAR) in the BIOS; check dmesg for \"BAR 1 ... can't assign; no space\"")
			continue
		}
		r.Evidence = append(r.Evidence, Evidence{Source: "/sys/bus/pci/devices/" + s + "/resource line " + fmt.Sprint(bar.Index), Value: fmt.Sprintf("0x%016x 0x%016x 0x%016x", bar.Start, bar.End, bar.Flags)})
		size := bar.Size()
		desc := sizeString(size)
		var msgs []string
		st := Pass
		if g.Config == nil || !g.Config.ExtCapsKnown {
			rebarUnknown++
		} else {
			for _, rb := range g.Config.ReBAR {
				if rb.BAR != bar.Index || len(rb.Supported) == 0 {
					continue
				}
				maxSize := rb.Supported[len(rb.Supported)-1]
				desc += fmt.Sprintf(" (ReBAR current %s, max %s)", sizeString(rb.Current), sizeString(maxSize))
				if rb.Current < maxSize {
					st = worse(st, Warn)
					msgs = append(msgs, fmt.Sprintf("Resizable BAR allows %s but BAR1 is %s", sizeString(maxSize), sizeString(rb.Current)))
					r.Remediation = appendOnce(r.Remediation, "enable Resizable BAR and Above 4G Decoding in the BIOS, or resize at run time: echo <log2 MiB> > /sys/bus/pci/devices/<bdf>/resource1_resize (driver unbound)")
				}
			}
		}
		if ng := f.nvmlGPU(g.Address); ng != nil {
			if ng.BAR1Total != nil && ng.BAR1Used != nil {
				desc += fmt.Sprintf(", NVML used %s of %s", sizeString(*ng.BAR1Used), sizeString(*ng.BAR1Total))
				r.Evidence = append(r.Evidence, Evidence{Source: "nvmlDeviceGetBAR1MemoryInfo(" + s + ")", Value: fmt.Sprintf("total=%d used=%d", *ng.BAR1Total, *ng.BAR1Used)})
				if *ng.BAR1Total > 0 && *ng.BAR1Used*10 >= *ng.BAR1Total*9 {
					st = worse(st, Warn)
					msgs = append(msgs, "BAR1 is at least 90% used: new GPUDirect and GDRCopy mappings will fail")
				}
			}
			if ng.MemoryTotal != nil && size < *ng.MemoryTotal {
				st = worse(st, Warn)
				msgs = append(msgs, fmt.Sprintf("BAR1 %s is smaller than the %s framebuffer: peers and NICs see only part of it", sizeString(size), sizeString(*ng.MemoryTotal)))
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
	switch r.Status {
	case Pass:
		r.Summary = fmt.Sprintf("BAR1 of %d GPU(s) assigned", len(gpus))
		if rebarUnknown > 0 {
			r.Summary += "; Resizable BAR unknown without root"
		}
	default:
		r.Summary = fmt.Sprintf("BAR1 problem on %d of %d GPU(s)", len(r.Subjects), len(gpus))
	}
	return r
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

// sizeString formats a byte count in binary units: "256 MiB", "128 GiB".
func sizeString(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for n >= 1024 && n%1024 == 0 && i < len(units)-1 {
		n /= 1024
		i++
	}
	return fmt.Sprintf("%d %s", n, units[i])
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
