package pcie

// LinkState is a function's link: what it trained to and what it is capable of.
type LinkState struct {
	Current Link // LNKSTA, or sysfs current_link_speed/width
	Max     Link // LNKCAP, or sysfs max_link_speed/width
}

// Degraded reports whether the link runs below its capability: a current speed or
// width lower than the maximum, where both are known. GPUs lower their link speed
// when idle, so a degraded speed on an idle GPU is not by itself a fault.
func (s LinkState) Degraded() bool {
	speed := s.Current.Speed != 0 && s.Max.Speed != 0 && s.Current.Speed < s.Max.Speed
	width := s.Current.Width > 0 && s.Max.Width > 0 && s.Current.Width < s.Max.Width
	return speed || width
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
