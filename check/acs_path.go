package check

import (
	"fmt"
	"slices"

	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/provision"
)

// acsScan is what checkACSPath needs of the pairs.
type acsScan struct {
	bridges        map[pcie.Address]*redirected // bridge → the pairs it redirects
	redirectBlocks []Capability                 // what the redirected pairs need
	unknown        int                          // pairs whose ACS state was not read
	nvlink         int                          // GPU pairs over NVLink, whose path ACS does not act on
	nvlinkBridges  map[pcie.Address]bool        // bridges that redirect only such pairs' PCIe path
	unknownBlocks  []Capability                 // what those pairs need
	lines          pairLines                    // the unknown pairs, as subjects

	// the first pair of each capability, to order the blocks as the pairs meet them
	redirectFirst, unknownFirst map[Capability]pair
}

// redirected counts the pairs a bridge redirects and names the first.
type redirected struct {
	n         int
	first     string
	firstPair pair
}

// count judges the pairs of two classes, whose verdicts are alike, for
// checkACSPath; v is the verdict of their first pair, nvlink whether they are
// GPUs that talk over NVLink (one pair then: such GPUs are classes of their own).
func (s *acsScan) count(cp classPair, v *p2pdma.Verdict, nvlink bool) {
	if nvlink {
		s.nvlink += cp.n
		if v.Fix != nil {
			if s.nvlinkBridges == nil {
				s.nvlinkBridges = map[pcie.Address]bool{}
			}
			for _, a := range v.Fix.Bridges {
				s.nvlinkBridges[a] = true
			}
		}
		return
	}
	if v.Fix != nil {
		for _, a := range v.Fix.Bridges {
			b := s.bridges[a]
			if b == nil {
				b = &redirected{firstPair: cp.first}
				s.bridges[a] = b
			} else if cp.first.before(b.firstPair) {
				b.firstPair = cp.first
			}
			b.n += cp.n
		}
		s.redirectFirst = firstOf(s.redirectFirst, cp.first.blocks(), cp.first)
	}
	if s.makes(v, false) {
		s.unknown += cp.n
		s.lines.count("", true, cp.n)
		s.unknownFirst = firstOf(s.unknownFirst, cp.first.blocks(), cp.first)
	}
}

// firstOf records p as the first pair of capability c unless an earlier one is.
func firstOf(m map[Capability]pair, c Capability, p pair) map[Capability]pair {
	if m == nil {
		m = map[Capability]pair{}
	}
	if q, ok := m[c]; !ok || p.before(q) {
		m[c] = p
	}
	return m
}

// makes reports whether a pair of verdict v makes a subject: ACS not read on a
// path the kernel does not redirect otherwise, of a pair not over NVLink.
func (s *acsScan) makes(v *p2pdma.Verdict, nvlink bool) bool {
	return !nvlink && len(v.ACSRedirect) == 0 && v.HasUnknown(p2pdma.ACSUnread)
}

// add lists one pair for checkACSPath, counted already.
func (s *acsScan) add(p pair, v *p2pdma.Verdict, nvlink bool) {
	if s.makes(v, nvlink) {
		s.lines.subject(p)
	}
}

// finish names each bridge's first pair and orders the blocks as their first
// pairs come.
func (s *acsScan) finish() {
	for _, b := range s.bridges {
		b.first = pairSubject(b.firstPair)
	}
	s.redirectBlocks, s.unknownBlocks = inPairOrder(s.redirectFirst), inPairOrder(s.unknownFirst)
}

// inPairOrder returns the capabilities of m in the order of their first pairs.
func inPairOrder(m map[Capability]pair) []Capability {
	var out []Capability
	for c := range m {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Capability) int {
		if m[a].before(m[b]) {
			return -1
		}
		return 1
	})
	return out
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
// ACS acts on PCIe TLPs only (PCIe Base Specification, Access Control Services):
// GPU pairs that talk over NVLink or NVSwitch, as NVML tells (see nvlinkPair), do
// not cross the bridges, so their redirect blocks nothing; iommu_mode judges them
// alike. On an HGX/DGX with NVML facts only the GPU-NIC and NVMe pairs remain.
// Without NVML whether a GPU pair uses NVLink is unknown and its PCIe path is
// judged: that is the path it uses without NVLink.
//
// In a virtual machine the guest's bridges are virtual: their ACS bits do not
// route the physical traffic, so the check does not apply and offers no setpci;
// NCCL's troubleshooting guide says a VM needs ACS enabled on the host and ATS
// on the NICs.
//
// On a virtualization host (--virt-host, or found from the ConnectX NICs' ATS, as
// `p2pcheck fix` finds it) redirect between peers is the isolation the VMs need:
// the check does not apply there, and virt_host judges the translated path.
func checkACSPath(f *Facts) Result {
	r := Result{Refs: []string{docRef("acs_path"), refP2PDMA, refACSRedi, refConfigACS, refNCCLVM, refNVAIEAppendix}}
	sc := f.scan()
	if sc.n == 0 {
		r.Status, r.Summary = Skip, noPairs
		return r
	}
	use, why, useErr := f.use()
	if useErr == nil && use == provision.ModeVirtHost && !f.Hypervisor() {
		r.Status = Skip
		r.Summary = "virtualization host (" + why + "): ACS redirect between peers is the isolation VMs need; virt_host judges the translated P2P path"
		return r
	}
	s := &sc.acs
	bridges := s.bridges
	addrs := sortedKeys(bridges)
	if f.Hypervisor() {
		r.Status = Skip
		r.Summary = "virtual machine: the guest's bridges are virtual and their ACS does not route physical P2P; NCCL's troubleshooting guide says VMs need ACS enabled on the host and ATS on the NICs (" + atsSteps + ")"
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
				Message: fmt.Sprintf("%s, ACSCtl %s, on the path of %d pair(s), e.g. %s; fix: %s", bridgeWhat(d), pcie.ACSString(acs.Control), bridges[a].n, bridges[a].first, p2pdma.SetpciClear(a))})
			r.Evidence = append(r.Evidence, Evidence{Source: "/sys/bus/pci/devices/" + a.String() + "/config ECAP_ACS+6.w", Value: fmt.Sprintf("%04x", acs.Control)})
		}
		names := addrList(addrs)
		r.Observed = "ACS redirect (RR/CR/EC) set on " + names
		r.Expected = "no ACS redirect between peers below a common bridge"
		r.Remediation = append(r.Remediation, f.bootFix(addrs), runtimeFix(addrs), biosNote)
		if s.unknown > 0 {
			r.Summary += fmt.Sprintf("; %d more pair(s) unknown", s.unknown)
		}
		if useErr != nil && !f.Hypervisor() {
			// On a virtualization host the redirect is wanted: whether it is a
			// fault depends on what the node is for.
			r.Status = Unknown
			r.Summary += "; whether that is a fault is unknown: " + useErr.Error()
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
		if len(s.nvlinkBridges) > 0 {
			r.Summary = fmt.Sprintf("no ACS redirect between the %d peer pair(s) that use PCIe", sc.n-s.nvlink)
			r.Observed = "ACS redirect only on the PCIe paths of GPU pairs that talk over NVLink: " + addrList(sortedKeys(s.nvlinkBridges))
		}
	}
	if s.nvlink > 0 {
		r.Findings = append(r.Findings, Finding{Subject: "NVLink GPU pairs", Status: Pass,
			Message: fmt.Sprintf("%d GPU pair(s) talk over NVLink/NVSwitch (NVML): ACS acts on PCIe TLPs only, so their PCIe path is not judged", s.nvlink)})
	}
	if dd := f.dataDirect(); len(dd) > 0 {
		r.Refs = append(r.Refs, refDataDirect)
		r.Findings = append(r.Findings, dd...)
		r.Status = worse(r.Status, Fail)
		r.addBlocks(CapGDR)
		r.Summary += fmt.Sprintf("; %d problem(s) on NVIDIA's Data Direct path", len(dd))
		r.Remediation = append(r.Remediation, "Data Direct: p2pcheck fix --apply sets the shape's bits; p2pcheck fix --persist and a reboot give the IOMMU group")
	}
	return r
}

// bootFix is the boot-time fix of clearing RR, CR and EC on addrs, in the form the
// analysed kernel parses, made by the one function `p2pcheck fix` makes it with
// (provision.NewBootParam: pci=disable_acs_redir= up to 6.10, pci=config_acs= with
// every bit from the fixed 6.12.23, 6.13.11, 6.14.2 and 6.15, none on the broken
// parser between), or why no parameter keeps it.
func (f *Facts) bootFix(addrs []pcie.Address) string {
	b := provision.ClearRedirectParam(f.Node.Topology, f.Node.Release(), addrs)
	if b.Usable() {
		return "kernel command line: \"" + b.Param + "\" (quote it: the ';' is part of it; `p2pcheck fix --persist` writes it): " + b.Reason
	}
	return "no boot parameter keeps it (" + string(b.Form) + "): " + b.Reason
}

// runtimeFix is the run-time fix of clearing RR, CR and EC on addrs, with what
// undoes it.
func runtimeFix(addrs []pcie.Address) string {
	return setpciAll(addrs) + " (or `p2pcheck fix --apply`) at run time: lost at reboot, and undone whenever " +
		"the kernel restores a port's state (pci_restore_state() calls pci_enable_acs() on resume, runtime D3, " +
		"AER or DPC recovery, a reset); acs_drift notices it"
}

// biosNote says why ACS off in the BIOS is no fix where an IOMMU is active.
const biosNote = "ACS off in the BIOS does not stay off where an IOMMU is active: the kernel sets RR and CR " +
	"again at boot (pci_std_enable_acs() in drivers/pci/pci.c); NCCL's troubleshooting guide names turning " +
	"VT-d/IOMMU (IO virtualization) off in the BIOS as the firmware route, which drops the IOMMU's protection"

// bridgeWhat describes a bridge: its port type and vendor:device.
func bridgeWhat(d *pcie.Device) string {
	s := fmt.Sprintf("[%04x:%04x]", d.Vendor, d.Device)
	if t, ok := d.PortType(); ok {
		s = t.String() + " " + s
	}
	return s
}

// setpciAll is the run-time fix of every bridge in one command line: the
// p2pdma.SetpciClear of one bridge, a shell loop over several.
func setpciAll(addrs []pcie.Address) string {
	if len(addrs) == 1 {
		return p2pdma.SetpciClear(addrs[0])
	}
	return "for b in " + addrListSep(addrs, " ") + "; do setpci -s $b " + p2pdma.SetpciClearArgs + "; done"
}
