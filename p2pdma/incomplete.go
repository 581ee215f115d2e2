package p2pdma

import (
	"github.com/p2pkit/p2pkit/pcie"
)

// CheckComplete returns v, the verdict c gave provider and client, made Unknown when
// it rests on a part of the tree that could not be read: a function on either walk
// up to the common upstream bridge (to the root bus when there is none) whose
// parent is not known (pcie.Device.PathIncomplete: a bridge of its sysfs path is
// missing, or its parent link closed a loop; for a VF, its PF's). The kernel's walk
// in calc_map_type_and_dist() (drivers/pci/p2pdma.c) would pass through the missing
// bridges, whose ACS Control and count decide the map type and the distance. It
// takes O(log depth) steps.
func (c *Calculator) CheckComplete(v Verdict, provider, client *pcie.Device) Verdict {
	if v.MapType == Unknown {
		return v
	}
	pi, okP := c.index[provider]
	ci, okC := c.index[client]
	if !okP || !okC {
		return v
	}
	top := int32(-1)
	if v.Common != nil {
		top = c.tree.LCA(pi, ci)
	}
	for _, x := range [2]int32{pi, ci} {
		if y := c.devs[x].nearGap; c.below(y, top) {
			u := UnknownFact{Kind: ParentUnknown, Device: &c.linkOwner(y).Address}
			v.MapType = Unknown
			v.Reason = u.String() + ": the kernel's walk would cross the missing bridges"
			v.Fix = nil
			v.Unknowns = append(v.Unknowns, u)
			return v
		}
	}
	return v
}
