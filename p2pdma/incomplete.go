package p2pdma

import (
	"github.com/p2pkit/p2pkit/pcie"
)

// CheckComplete returns v, the verdict for provider and client, made Unknown when
// it rests on a part of the tree that could not be read: a function on either walk
// up to the common upstream bridge (to the root bus when there is none) whose
// parent is not known (pcie.Device.PathIncomplete: a bridge of its sysfs path is
// missing, or its parent link closed a loop). The kernel's walk in
// calc_map_type_and_dist() (drivers/pci/p2pdma.c) would pass through the missing
// bridges, whose ACS Control and count decide the map type and the distance.
func CheckComplete(v Verdict, provider, client *pcie.Device) Verdict {
	if v.MapType == Unknown {
		return v
	}
	for _, end := range []*pcie.Device{provider, client} {
		if gap := incompleteBelow(end, v.Common); gap != nil {
			u := UnknownFact{Kind: ParentUnknown, Device: &gap.Address}
			v.MapType = Unknown
			v.Reason = u.String() + ": the kernel's walk would cross the missing bridges"
			v.Fix = nil
			v.Unknowns = append(v.Unknowns, u)
			return v
		}
	}
	return v
}

// incompleteBelow returns the first function on d's walk up to common (exclusive;
// the whole chain when common is nil) whose link to its parent is not known, or nil.
// A VF climbs through its PF, whose parent link it uses.
func incompleteBelow(d *pcie.Device, common *pcie.Address) *pcie.Device {
	if d == nil {
		return nil
	}
	if gap := incompleteLink(d, common); gap != nil || (common != nil && d.Address == *common) {
		return gap
	}
	for _, x := range d.Ancestors() {
		if gap := incompleteLink(x, common); gap != nil || (common != nil && x.Address == *common) {
			return gap
		}
	}
	return nil
}

// incompleteLink returns the function owning x's link to its parent (x, or its PF)
// when that link is not known and x is not common; else nil.
func incompleteLink(x *pcie.Device, common *pcie.Address) *pcie.Device {
	if common != nil && x.Address == *common {
		return nil
	}
	owner := x
	if x.PF != nil {
		owner = x.PF
	}
	if owner.PathIncomplete {
		return owner
	}
	return nil
}
