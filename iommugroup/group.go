// Package iommugroup predicts the IOMMU groups the Linux kernel forms for PCI
// functions from their ACS capabilities, with the rules of pci_device_group()
// (drivers/iommu/iommu.c) and pci_acs_enabled(), pci_acs_flags_enabled() and
// pci_acs_path_enabled() (drivers/pci/pci.c). Groups are formed once, when the
// IOMMU driver probes each function at boot, so a prediction from ACS values set
// at run time or by a boot parameter is what the next boot gives.
//
// Not modelled: device-specific ACS quirks (pci_dev_specific_acs_enabled() in
// drivers/pci/quirks.c, for root ports and multifunction devices that isolate
// without an ACS capability) and DMA aliases other than those of PCIe-to-PCI bridges
// (pci_for_each_dma_alias(), PCI_DEV_FLAGS_DMA_ALIAS quirks). [Check] compares a
// prediction with the groups the kernel formed, which shows whether a quirk was at
// work. The package is pure: it reads only the pcie.Topology it is given.
package iommugroup

import (
	"fmt"
	"slices"

	"github.com/p2pkit/p2pkit/pcie"
)

// ReqACSFlags is REQ_ACS_FLAGS of drivers/iommu/iommu.c: the ACS Control bits a
// port must have set (or hard-wired) to isolate what is below it.
const ReqACSFlags = pcie.ACSSourceValidation | pcie.ACSRequestRedirect | pcie.ACSCompletionRedirect | pcie.ACSUpstreamForwarding

// maxDepth bounds the walks up the tree, as pcie bounds PCI hierarchies.
const maxDepth = 256

// Prediction is the groups of every function of a topology.
type Prediction struct {
	// Group maps each function whose group could be predicted to a group number;
	// groups are numbered from 0 in the address order of their first function.
	Group map[pcie.Address]int
	// Unknown lists, in address order, the functions whose group depends on an ACS
	// capability that was not read (config space past 64 bytes needs root).
	Unknown []pcie.Address

	members [][]pcie.Address // per group, in address order
}

// Predict returns the groups pci_device_group() gives the functions of t.
func Predict(t *pcie.Topology) Prediction {
	p := &predictor{memo: map[*pcie.Device]int{}}
	out := Prediction{Group: map[pcie.Address]int{}}
	renumber := map[int]int{}
	for _, d := range t.Devices {
		g := p.group(d, 0)
		if g < 0 {
			out.Unknown = append(out.Unknown, d.Address)
			continue
		}
		n, ok := renumber[g]
		if !ok {
			n = len(renumber)
			renumber[g] = n
			out.members = append(out.members, nil)
		}
		out.Group[d.Address] = n
		out.members[n] = append(out.members[n], d.Address)
	}
	return out
}

// Members returns the functions of group g in address order.
func (p Prediction) Members(g int) []pcie.Address {
	if g < 0 || g >= len(p.members) {
		return nil
	}
	return p.members[g]
}

// Len returns the number of groups.
func (p Prediction) Len() int { return len(p.members) }

// Same reports whether a and b are predicted to share a group; known is false when
// either group is unknown.
func (p Prediction) Same(a, b pcie.Address) (same, known bool) {
	ga, oka := p.Group[a]
	gb, okb := p.Group[b]
	return oka && okb && ga == gb, oka && okb
}

const unknownGroup = -1

type predictor struct {
	memo map[*pcie.Device]int // group per function, in allocation numbers
	next int
}

// group is pci_device_group() for d: d joins the group of the nearest bridge above
// it whose own path to the root bus is not isolated (the bus->self walk; a VF's bus
// is its PF's), else the group of another non-isolated function of its
// multifunction device (get_pci_function_alias_group()), else a new group. Bridges
// are grouped before what is below them, as the kernel probes them first.
func (p *predictor) group(d *pcie.Device, depth int) int {
	if g, ok := p.memo[d]; ok {
		return g
	}
	if depth > maxDepth {
		return unknownGroup
	}
	g := p.compute(d, depth)
	p.memo[d] = g
	return g
}

func (p *predictor) compute(d *pcie.Device, depth int) int {
	if b := d.Upstream(); b != nil {
		iso, known := pathEnabled(b)
		if !known {
			return unknownGroup
		}
		if !iso {
			return p.group(b, depth+1)
		}
	}
	en, known := enabled(d)
	if !known {
		return unknownGroup
	}
	if multifunction(d) && !en {
		for _, o := range siblings(d) {
			if oen, ok := enabled(o); ok && !oen {
				if g, done := p.memo[o]; done && g >= 0 {
					return g
				}
			}
		}
	}
	g := p.next
	p.next++
	return g
}

// siblings returns the other functions of d's device (same bus and device number),
// VFs excepted, in address order.
func siblings(d *pcie.Device) []*pcie.Device {
	var peers []*pcie.Device
	switch {
	case d.Parent != nil:
		peers = d.Parent.Children
	case d.HostBridge != nil:
		peers = d.HostBridge.Devices
	}
	var out []*pcie.Device
	for _, o := range peers {
		if o != d && !o.IsVF() && o.Address.Domain == d.Address.Domain &&
			o.Address.Bus == d.Address.Bus && o.Address.Device == d.Address.Device {
			out = append(out, o)
		}
	}
	return out
}

// multifunction mirrors dev->multifunction: the header type's multifunction bit of
// function 0, and every function past 0 (pci_scan_slot() in drivers/pci/probe.c
// sets it for them whatever their own header says). A VF is not one.
func multifunction(d *pcie.Device) bool {
	if d.IsVF() {
		return false
	}
	return d.Config != nil && d.Config.MultiFunction || d.Address.Function > 0
}

// pathEnabled mirrors pci_acs_path_enabled(start, NULL, REQ_ACS_FLAGS): start and
// every bridge above it up to the root bus isolate.
func pathEnabled(start *pcie.Device) (isolated, known bool) {
	x := start
	for i := 0; x != nil; i, x = i+1, x.Upstream() {
		if i > maxDepth {
			return false, false
		}
		en, ok := enabled(x)
		if !ok {
			return false, false
		}
		if !en {
			return false, true
		}
	}
	return true, true
}

// enabled mirrors pci_acs_enabled(d, REQ_ACS_FLAGS) without device quirks:
// conventional PCI functions, PCIe-to-PCI and PCI-to-PCIe bridges and root complex
// event collectors never isolate; root ports and downstream ports isolate when their
// ACS flags are enabled; other functions isolate unless they belong to a
// multifunction device, which isolates its functions only through their ACS flags.
func enabled(d *pcie.Device) (en, known bool) {
	c := d.Config
	if c == nil || !c.CapsKnown {
		return false, false
	}
	if c.Express == nil {
		return false, true
	}
	switch c.Express.PortType {
	case pcie.PortPCIeToPCI, pcie.PortPCIToPCIe, pcie.PortRCEC:
		return false, true
	case pcie.PortRootPort, pcie.PortDownstream:
		return flagsEnabled(d)
	}
	if multifunction(d) {
		return flagsEnabled(d)
	}
	return true, true
}

// flagsEnabled mirrors pci_acs_flags_enabled(d, REQ_ACS_FLAGS): every required flag
// the capability offers is set in Control; a flag the capability lacks counts as
// hard-wired on, except Egress Control (not among REQ_ACS_FLAGS anyway).
func flagsEnabled(d *pcie.Device) (en, known bool) {
	acs, known := d.ACS()
	if !known {
		return false, false
	}
	if acs == nil {
		return false, true
	}
	need := ReqACSFlags & (acs.Capability | pcie.ACSEgressControl)
	return acs.Control&need == need, true
}

// Mismatch is a function whose predicted group partition differs from the groups as
// read.
type Mismatch struct {
	Address pcie.Address
	// Predicted are the functions predicted to share its group, Read those that
	// share it on the machine, both in address order and including it.
	Predicted, Read []pcie.Address
}

func (m Mismatch) String() string {
	return fmt.Sprintf("%s: predicted with %v, read with %v", m.Address, m.Predicted, m.Read)
}

// Check compares a prediction for t's own ACS values with the groups the kernel
// formed (pcie.Record.IOMMUGroup). Functions whose group was not read or not
// predicted are skipped. A mismatch means the kernel used a rule the package does
// not model (a quirk, a DMA alias) and predictions for this machine are uncertain.
func Check(t *pcie.Topology, p Prediction) []Mismatch {
	read := map[int][]pcie.Address{}
	for _, d := range t.Devices {
		if _, ok := p.Group[d.Address]; ok && d.IOMMUGroup != nil {
			read[*d.IOMMUGroup] = append(read[*d.IOMMUGroup], d.Address)
		}
	}
	var out []Mismatch
	for _, d := range t.Devices {
		g, ok := p.Group[d.Address]
		if !ok || d.IOMMUGroup == nil {
			continue
		}
		var pred []pcie.Address
		for _, a := range p.Members(g) {
			if x := t.Device(a); x != nil && x.IOMMUGroup != nil {
				pred = append(pred, a)
			}
		}
		if !slices.Equal(pred, read[*d.IOMMUGroup]) {
			out = append(out, Mismatch{Address: d.Address, Predicted: pred, Read: read[*d.IOMMUGroup]})
		}
	}
	return out
}
