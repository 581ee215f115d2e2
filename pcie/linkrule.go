package pcie

// BothEnds is a link judged against both of its ends: what the lower end
// trained to and the best the two ends can do together.
type BothEnds struct {
	// Current is the lower end's current speed and width (LNKSTA).
	Current Link
	// Max is the lower end's own maximum (LNKCAP).
	Max Link
	// Port is the upper end's maximum (its LNKCAP); zero when the lower end sits
	// on a root bus and has no port above it.
	Port Link
	// Best is the lower of the two maxima, speed and width each: the most the
	// link can train to.
	Best Link
}

// SpeedBelow reports whether the link runs slower than both ends support.
func (b BothEnds) SpeedBelow() bool { return b.Current.Speed < b.Best.Speed }

// WidthBelow reports whether the link has fewer lanes than both ends support.
func (b BothEnds) WidthBelow() bool { return b.Current.Width < b.Best.Width }

// Below reports whether the link runs below what both of its ends support.
func (b BothEnds) Below() bool { return b.SpeedBelow() || b.WidthBelow() }

// PortLimits reports whether the upper end's capability, not the lower end's,
// caps the link: the slot is slower or narrower than the card. The kernel
// reports such a link as "limited by" the port (drivers/pci/pci.c
// __pcie_print_link_status, which compares pcie_bandwidth_available() along
// the path with the device's own pcie_bandwidth_capable()).
func (b BothEnds) PortLimits() bool {
	return b.Port.Known() && (b.Port.Speed < b.Max.Speed || b.Port.Width < b.Max.Width)
}

// LinkBelowBothEnds judges the link above d, an endpoint or a switch upstream
// port (the link's lower end), against the port at its other end (d's parent):
// the link runs below what both of its ends support when its current speed or
// width is below the lower of the two maxima. This is the rule of the kernel's
// link report (drivers/pci/pci.c pcie_print_link_status(), which reads LNKSTA
// and LNKCAP through pcie_bandwidth_available() and pcie_get_speed_cap()) taken
// one link at a time. It is not lspci's "(downgraded)", which compares a
// function only with its own LNKCAP.
//
// ok is false when a fact is missing: d's current or maximum link, or the
// maximum of the port above it while d runs below its own. A function on a root
// bus has no port above it and is judged against its own maximum.
func LinkBelowBothEnds(d *Device) (b BothEnds, ok bool) {
	l := d.Link()
	if !l.Current.Known() || !l.Max.Known() {
		return BothEnds{}, false
	}
	b = BothEnds{Current: l.Current, Max: l.Max, Best: l.Max}
	if p := d.Parent; p != nil {
		pl := p.Link()
		if !pl.Max.Known() {
			// The link cannot train above d's own maximum: at that maximum it is
			// the best both ends can do whatever the port supports.
			if l.Current.Speed >= l.Max.Speed && l.Current.Width >= l.Max.Width {
				return b, true
			}
			return BothEnds{}, false
		}
		b.Port = pl.Max
		b.Best = Link{Speed: min(l.Max.Speed, pl.Max.Speed), Width: min(l.Max.Width, pl.Max.Width)}
	}
	return b, true
}
