package check

import (
	"fmt"
	"strings"

	"github.com/p2pkit/p2pkit/pcie"
)

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
		r.Status, r.Summary = Skip, "no GPU, RDMA NIC or NVMe controller"
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
