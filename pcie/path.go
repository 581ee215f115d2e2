package pcie

import "slices"

// Hop is one function on a Path with its link.
type Hop struct {
	Device *Device
	Link   LinkState
}

// Path is the route between two functions through the tree.
type Path struct {
	From, To *Device
	// Hops run from From up to the turning point and down to To: From and its
	// ancestors up to Common, then Common's descendants down to To. Without a
	// common device they run from From up to its root bus, then from To's root bus
	// down to To. Chains are those of Ancestors: a VF climbs through its PF's
	// parent.
	Hops []Hop
	// Common is the nearest device shared by both chains (see CommonUpstream), or
	// nil when the path crosses the root complex.
	Common *Device
	// FromHost and ToHost are the host bridges the path goes through when Common
	// is nil; they are the same one when both ends are below one root complex.
	FromHost, ToHost *HostBridge
	// Narrowest is the slowest known current link on the path (lowest rate summed
	// over lanes), or the zero Link when no hop's current link is known. Because a
	// root or downstream port reports the link below it, each physical link is
	// counted from both of its ends.
	Narrowest Link
}

// Path returns the route from a to b. Both must belong to t.
func (t *Topology) Path(a, b *Device) Path {
	common, da, db := CommonUpstream(a, b)
	p := Path{From: a, To: b, Common: common}
	if common == nil {
		p.FromHost, p.ToHost = a.HostBridge, b.HostBridge
	}
	n := da + db
	if common != nil {
		n++
	}
	p.Hops = make([]Hop, 0, n)
	last := da // up to and including Common
	if common == nil {
		last = da - 1
	}
	x := a
	for k := 0; k <= last; k, x = k+1, x.Upstream() {
		p.Hops = append(p.Hops, hopOf(x))
	}
	// b's side, climbed from b and then reversed into descending order.
	down := len(p.Hops)
	x = b
	for k := 0; k < db; k, x = k+1, x.Upstream() {
		p.Hops = append(p.Hops, hopOf(x))
	}
	slices.Reverse(p.Hops[down:])
	best := 0
	for _, h := range p.Hops {
		if r := h.Link.Current.rate(); r > 0 && (best == 0 || r < best) {
			best, p.Narrowest = r, h.Link.Current
		}
	}
	return p
}

func hopOf(d *Device) Hop { return Hop{Device: d, Link: d.Link()} }
