package pcie

// LinkState is a function's link: what it trained to and what it is capable of.
type LinkState struct {
	Current Link // LNKSTA, or sysfs current_link_speed/width
	Max     Link // LNKCAP, or sysfs max_link_speed/width
}

// LinkDowngraded reports what lspci -vv marks "(downgraded)" on the LnkSta line
// (pciutils ls-caps.c link_compare): the function's link runs at a lower speed, or
// on fewer lanes, than its own LnkCap allows. It is never reported for root ports,
// downstream ports and PCI Express-to-PCI bridges, whose link partner below may be
// what limits them. This is not the kernel's "below what both ends support"
// (drivers/pci/pci.c pcie_bandwidth_available), which pcie_link judges.
//
// Speed and width are compared each where both sides are known; known is false when
// neither is, or when d is a bridge whose port type could not be read. A link
// faster than its capability (lspci's "(overdriven)") is not downgraded.
func (d *Device) LinkDowngraded() (downgraded, known bool) {
	l := d.Link()
	speedKnown := l.Current.Speed.known() && l.Max.Speed.known()
	widthKnown := l.Current.Width > 0 && l.Max.Width > 0
	if !speedKnown && !widthKnown {
		return false, false
	}
	if d.IsBridge() {
		pt, ok := d.PortType()
		if !ok {
			return false, false
		}
		if pt == PortRootPort || pt == PortDownstream || pt == PortPCIeToPCI {
			return false, true
		}
	}
	return speedKnown && l.Current.Speed < l.Max.Speed || widthKnown && l.Current.Width < l.Max.Width, true
}

// Link returns the function's link. Each field comes from the PCI Express
// capability's LNKSTA and LNKCAP when config space was read and holds it, else from
// the sysfs attributes of the record; a VF with neither takes its PF's.
//
// For an endpoint or an upstream port this is the link toward its parent; for a root
// or downstream port it is the link below it, to its child.
func (d *Device) Link() LinkState {
	s := LinkState{Current: d.CurrentLink, Max: d.MaxLink}
	if d.Config != nil && d.Config.Express != nil && d.Config.Express.HasLink {
		e := d.Config.Express
		s.Current = mergeLink(e.LinkStat, s.Current)
		s.Max = mergeLink(e.LinkCap, s.Max)
	}
	if d.PF != nil && d.PF != d {
		pf := d.PF.Link()
		s.Current = mergeLink(s.Current, pf.Current)
		s.Max = mergeLink(s.Max, pf.Max)
	}
	return s
}

// mergeLink takes each field from l when known, else from fallback.
func mergeLink(l, fallback Link) Link {
	if l.Speed == 0 || l.Speed > maxLinkSpeed {
		l.Speed = fallback.Speed
	}
	if l.Width <= 0 {
		l.Width = fallback.Width
	}
	return l
}
