package check

import (
	"fmt"
	"slices"

	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pcie"
)

// acsScan is what checkACSPath needs of the pairs.
type acsScan struct {
	bridges        map[pcie.Address]*redirected // bridge → the pairs it redirects
	redirectBlocks []Capability                 // what the redirected pairs need
	unknown        int                          // pairs whose ACS state was not read
	unknownBlocks  []Capability                 // what those pairs need
	lines          pairLines                    // the unknown pairs, as subjects
}

// redirected counts the pairs a bridge redirects and names the first.
type redirected struct {
	n     int
	first string
}

// add judges one pair for checkACSPath.
func (s *acsScan) add(p pair, v *p2pdma.Verdict) {
	if v.Fix != nil {
		for _, a := range v.Fix.Bridges {
			b := s.bridges[a]
			if b == nil {
				b = &redirected{first: pairSubject(p)}
				s.bridges[a] = b
			}
			b.n++
		}
		s.redirectBlocks = appendNew(s.redirectBlocks, p.blocks())
	}
	if len(v.ACSRedirect) == 0 && v.HasUnknown(p2pdma.ACSUnread) {
		s.unknown++
		s.lines.subject(p)
		s.unknownBlocks = appendNew(s.unknownBlocks, p.blocks())
	}
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
	bridges := s.bridges
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
				Message: fmt.Sprintf("%s, ACSCtl %s, on the path of %d pair(s), e.g. %s; fix: %s", bridgeWhat(d), pcie.ACSString(acs.Control), bridges[a].n, bridges[a].first, p2pdma.SetpciClear(a))})
			r.Evidence = append(r.Evidence, Evidence{Source: "/sys/bus/pci/devices/" + a.String() + "/config ECAP_ACS+6.w", Value: fmt.Sprintf("%04x", acs.Control)})
		}
		names := addrList(addrs)
		r.Observed = "ACS redirect (RR/CR/EC) set on " + names
		r.Expected = "no ACS redirect between peers below a common bridge"
		r.Remediation = append(r.Remediation, "kernel command line: \""+p2pdma.KernelParam(addrs)+"\" (quote it: the ';' is part of it), or disable ACS in the BIOS")
		r.Remediation = append(r.Remediation, setpciAll(addrs)+" (at run time, lost at reboot)")
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
