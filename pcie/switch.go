package pcie

import "slices"

// portRole is what a bridge is in the PCI Express hierarchy, from its port type
// when that could be read and otherwise from its place in the tree.
type portRole uint8

const (
	roleNone       portRole = iota // not a bridge
	roleRoot                       // root port, or a bridge on a root bus
	roleUpstream                   // switch upstream port
	roleDownstream                 // switch downstream port
	roleOther                      // PCIe-to-PCI and other bridges
)

// findSwitches gives every bridge a role, top down, and groups upstream ports with
// their downstream ports.
func (t *Topology) findSwitches() {
	var visit func(d *Device)
	visit = func(d *Device) {
		var inferred bool
		d.role, inferred = bridgeRole(d)
		if d.role == roleUpstream {
			s := &Switch{Upstream: d, Inferred: inferred}
			for _, c := range d.Children {
				if r, inf := bridgeRole(c); r == roleDownstream {
					s.Downstream = append(s.Downstream, c)
					s.Inferred = s.Inferred || inf
				}
			}
			// The tree's shape alone is weak evidence: an inferred upstream
			// port needs downstream ports below it to count as a switch.
			if !inferred || len(s.Downstream) > 0 {
				t.Switches = append(t.Switches, s)
			}
		}
		for _, c := range d.Children {
			visit(c)
		}
	}
	for _, d := range t.Devices {
		if d.Parent == nil {
			visit(d)
		}
	}
	// The walk is top down; list the switches in address order.
	slices.SortFunc(t.Switches, func(x, y *Switch) int { return x.Upstream.Address.Compare(y.Upstream.Address) })
}

// bridgeRole returns d's role, given its parent's role (already set), and whether
// it was inferred from the tree's shape rather than read from the PCI Express capability.
func bridgeRole(d *Device) (portRole, bool) {
	if !d.IsBridge() {
		return roleNone, false
	}
	if pt, ok := d.PortType(); ok {
		switch pt {
		case PortRootPort:
			return roleRoot, false
		case PortUpstream:
			return roleUpstream, false
		case PortDownstream:
			return roleDownstream, false
		}
		return roleOther, false
	}
	if d.Config != nil && d.Config.CapsKnown {
		// Capabilities were read and there is no PCI Express capability: a
		// conventional PCI bridge.
		if d.Parent == nil {
			return roleRoot, false
		}
		return roleOther, false
	}
	if d.Parent == nil {
		return roleRoot, true
	}
	switch d.Parent.role {
	case roleRoot, roleDownstream:
		return roleUpstream, true
	case roleUpstream:
		return roleDownstream, true
	}
	return roleOther, true
}
