package provision

import (
	"fmt"
	"strings"

	"github.com/p2pkit/p2pkit/iommugroup"
	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pcie"
)

// want is what the plan decides for one function's ACS Control: the bits of mask
// are to hold those of value.
type want struct {
	mask, value uint16
	pairs       int
	why         string
	shape       bool   // set by a shape, whose bits the generic rules do not change
	generic     uint16 // the bits the generic rules set
}

// wants collects the plan's decisions per function.
type wants map[*pcie.Device]*want

// set decides the bits of mask on d. A shape's decision (shape true) replaces the
// generic ones on the same bits and is never replaced by them.
func (w wants) set(d *pcie.Device, mask, value uint16, why string, shape bool) *want {
	x := w[d]
	if x == nil {
		x = &want{}
		w[d] = x
	}
	switch {
	case x.shape && !shape:
		mask &^= x.mask
	case shape && !x.shape && x.generic&^mask == 0:
		x.why = "" // the shape decides every bit the generic rules did
	}
	if !shape {
		x.generic |= mask
	}
	x.mask |= mask
	x.value = x.value&^mask | value&mask
	x.shape = x.shape || shape
	if mask != 0 && !strings.Contains(x.why, why) {
		if x.why != "" {
			x.why += "; "
		}
		x.why += why
	}
	return x
}

// Reasons of the generic rules.
const (
	whyRedirect  = "RR, CR and EC off between peers (pci_bridge_has_acs_redir(), drivers/pci/p2pdma.c)"
	whyIsolation = "SV, RR, CR and UF kept for separate IOMMU groups (REQ_ACS_FLAGS, drivers/iommu/iommu.c)"
	whyDirect    = "Direct Translated P2P for the translated requests of %s (ATS)"
)

// checked returns the functions the kernel's calc_map_type_and_dist() reads ACS
// Control of for the pair: the provider and its bridges up to and including the
// common upstream bridge, the client and its bridges below it; none when the path
// crosses the root complex, where the kernel ignores ACS.
func checked(t *pcie.Topology, a, b *pcie.Device) []*pcie.Device {
	p := t.Path(a, b)
	if p.Common == nil {
		return nil
	}
	out := make([]*pcie.Device, len(p.Hops))
	for i, h := range p.Hops {
		out[i] = h.Device
	}
	return out
}

// hasACS reports whether d's ACS capability was read and exists.
func hasACS(d *pcie.Device) *pcie.ACS {
	acs, _ := d.ACS()
	return acs
}

// bareMetal: RR, CR and EC off on every function with ACS the kernel checks for
// the pair, every other bit kept.
func (w wants) bareMetal(t *pcie.Topology, a, b *pcie.Device) {
	for _, d := range checked(t, a, b) {
		if hasACS(d) != nil {
			w.set(d, p2pdma.RedirectMask, 0, whyRedirect, false).pairs++
		}
	}
}

// virtHost: on every function with ACS on the pair's path, SV, RR, CR and UF as
// the capability offers them (what separate IOMMU groups need); and on the port
// where the path turns, on the side of an end with the ATS capability, Direct
// Translated P2P, which lets that end's translated requests go to the peer directly
// while untranslated ones are still redirected to the IOMMU (PCIe Base
// Specification, ACS Direct Translated P2P; NVIDIA AI Enterprise's VM appendix,
// "ATS and ACS configuration"). It returns what it cannot do.
func (w wants) virtHost(t *pcie.Topology, a, b *pcie.Device) []string {
	p := t.Path(a, b)
	var notes []string
	for _, h := range p.Hops {
		acs := hasACS(h.Device)
		if acs != nil {
			w.set(h.Device, iommugroup.ReqACSFlags, acs.Capability&iommugroup.ReqACSFlags, whyIsolation, false).pairs++
			continue
		}
		if p.Common != nil && h.Device != p.Common && isPort(h.Device) {
			notes = append(notes, fmt.Sprintf("%s has no ACS capability: the functions below it reach their peers below %s "+
				"directly, without the IOMMU, whatever their IOMMU groups say", h.Device.Address, p.Common.Address))
		}
	}
	for _, end := range []*pcie.Device{a, b} {
		if ats, _ := end.ATSState(); ats == nil {
			continue
		}
		if p.Common == nil {
			// Between root ports, peer-to-peer routing is the root complex's own
			// (PCIe Base Specification 6.12.1.1): rdma_topo sets nothing there either.
			continue
		}
		port := turningPort(end, p.Common)
		if port == nil {
			continue
		}
		acs := hasACS(port)
		if acs == nil || acs.Capability&pcie.ACSDirectTranslated == 0 {
			notes = append(notes, fmt.Sprintf("%s, where the path from %s turns, has no ACS Direct Translated P2P: "+
				"its translated requests go through the root complex", port.Address, end.Address))
			continue
		}
		w.set(port, pcie.ACSDirectTranslated, pcie.ACSDirectTranslated, fmt.Sprintf(whyDirect, end.Address), false)
	}
	return notes
}

// turningPort returns the port on end's side where the path to its peer turns: the
// downstream or root port just below the common upstream bridge. It is nil when end
// itself is that function (its own ACS, not a port's, decides) or it is not a port.
func turningPort(end, common *pcie.Device) *pcie.Device {
	x := end
	for i := 0; i <= 256; i++ {
		up := x.Upstream()
		if up == common {
			break
		}
		if up == nil {
			return nil
		}
		x = up
	}
	if x == end {
		return nil
	}
	if !isPort(x) {
		return nil
	}
	return x
}

// isPort reports whether d is a root port or a switch downstream port, the ports
// ACS redirect and Direct Translated P2P act at.
func isPort(d *pcie.Device) bool {
	pt, ok := d.PortType()
	return ok && (pt == pcie.PortRootPort || pt == pcie.PortDownstream)
}
