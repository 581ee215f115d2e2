package render

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/matrix"
	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pathclass"
	"github.com/p2pkit/p2pkit/pcie"
)

// DotMarks are what a picture marks as changed (p2pcheck diff draws the golden
// tree with them). Addresses are the golden's.
type DotMarks struct {
	// Devices maps a function to what changed about it.
	Devices map[pcie.Address][]string
	// Missing maps a function the node lacks to what is said of it.
	Missing map[pcie.Address]string
	// Pairs maps an ordered pair (provider, client) to what changed about it.
	Pairs map[[2]pcie.Address]string
	// Notes are changes of the whole node, or of devices the golden has not.
	Notes []string
}

// turn is one unordered pair of devices of interest and the kernel's verdict
// for it: the worse of its two directions.
type turn struct {
	a, b *pcie.Device
	v    p2pdma.Verdict
}

// gdrPair is a GPU and a NIC that GPUDirect RDMA would use: the NIC nearest the
// GPU by NCCL's path class, within NCCL's default GPUDirect RDMA level.
type gdrPair struct {
	gpu, nic *pcie.Device
	class    pathclass.Class
	v        p2pdma.Verdict // provider GPU, client NIC: the NIC writes GPU memory
}

// dotModel is what the picture shows, computed before anything is written.
type dotModel struct {
	t      *pcie.Topology
	labels map[*pcie.Device]matrix.Entry
	// drawn holds the devices of interest and every bridge above one; the other
	// functions are counted on the nearest drawn function above them (others) or
	// on their host bridge (hbOthers).
	drawn    map[*pcie.Device]bool
	others   map[*pcie.Device]int
	hbOthers map[*pcie.HostBridge]int
	// switches maps an upstream port to its switch, ports a downstream port to it.
	switches map[*pcie.Device]*pcie.Switch
	ports    map[*pcie.Device]*pcie.Switch
	// turns are the pairs whose path turns at a bridge (the kernel's common
	// upstream bridge); hbTurns those that cross one host bridge's root complex,
	// numaTurns those between host bridges of one NUMA node, sysTurns between
	// NUMA nodes.
	turns     map[*pcie.Device][]turn
	hbTurns   map[*pcie.HostBridge][]turn
	numaTurns map[int][]turn
	sysTurns  []turn
	gdr       []gdrPair
	nv        *gpu.Facts
	marks     DotMarks
	// pairsNote says why the pairs were not evaluated; empty when they were.
	pairsNote string
}

// newDotModel computes the picture of t: the kernel's verdict for every ordered
// pair of devices of interest (p2pdma), grouped by where the path turns.
func newDotModel(t *pcie.Topology, plat p2pdma.Platform, nv *gpu.Facts, marks DotMarks) *dotModel {
	m := &dotModel{t: t, labels: map[*pcie.Device]matrix.Entry{}, drawn: map[*pcie.Device]bool{},
		others: map[*pcie.Device]int{}, hbOthers: map[*pcie.HostBridge]int{},
		switches: map[*pcie.Device]*pcie.Switch{}, ports: map[*pcie.Device]*pcie.Switch{},
		turns: map[*pcie.Device][]turn{}, hbTurns: map[*pcie.HostBridge][]turn{}, numaTurns: map[int][]turn{},
		nv: nv, marks: marks}
	var devs []*pcie.Device
	for _, e := range matrix.Label(t.Devices) {
		m.labels[e.Device] = e
		devs = append(devs, e.Device)
		for x := e.Device; x != nil && !m.drawn[x]; x = x.Parent {
			m.drawn[x] = true
		}
	}
	for _, d := range t.Devices {
		m.countOther(d)
	}
	for _, s := range t.Switches {
		m.switches[s.Upstream] = s
		for _, p := range s.Downstream {
			m.ports[p] = s
		}
	}
	if len(devs) > maxDotPairDevices {
		m.pairsNote = fmt.Sprintf("%d devices of interest: the pairs' verdicts are drawn for at most %d (p2pcheck pairs lists them all)", len(devs), maxDotPairDevices)
		return m
	}
	m.pairs(t, plat, devs)
	return m
}

// maxDotPairDevices bounds the devices of interest whose pairs the picture
// evaluates: it keeps a verdict per unordered pair, and a picture of more could
// not be read anyway.
const maxDotPairDevices = 512

// countOther counts a function that is not drawn on the nearest drawn function
// above it; VFs are counted on their PF's label instead.
func (m *dotModel) countOther(d *pcie.Device) {
	if m.drawn[d] || d.IsVF() {
		return
	}
	for x := d.Parent; x != nil; x = x.Parent {
		if m.drawn[x] {
			m.others[x]++
			return
		}
	}
	if d.HostBridge != nil {
		m.hbOthers[d.HostBridge]++
	}
}

// pairs evaluates every pair and files it where its path turns.
func (m *dotModel) pairs(t *pcie.Topology, plat p2pdma.Platform, devs []*pcie.Device) {
	type key struct{ a, b *pcie.Device }
	worst := map[key]turn{}
	var order []key
	verdicts := map[key]p2pdma.Verdict{}
	calc := p2pdma.NewCalculator(t, plat)
	for e, v := range calc.AllEnds(devs) {
		v = calc.CheckComplete(v, e.Provider, e.Client)
		verdicts[key{e.Provider, e.Client}] = v
		k := key{e.Provider, e.Client}
		if e.Client.Address.Compare(e.Provider.Address) < 0 {
			k = key{e.Client, e.Provider}
		}
		old, ok := worst[k]
		if !ok {
			order = append(order, k)
		}
		if !ok || severity(v.MapType) > severity(old.v.MapType) {
			worst[k] = turn{a: k.a, b: k.b, v: v}
		}
	}
	for _, k := range order {
		m.file(worst[k])
	}
	for _, g := range devs {
		if g.IsGPU() {
			m.nearestNICs(g, devs, func(n *pcie.Device) p2pdma.Verdict { return verdicts[key{g, n}] })
		}
	}
}

// nearestNICs files the GPUDirect RDMA pairs of GPU g: the NICs nearest to it by
// NCCL's path class (src/graph/paths.cc) and then by the kernel's distance,
// when that class is within NCCL's default GPUDirect RDMA level.
func (m *dotModel) nearestNICs(g *pcie.Device, devs []*pcie.Device, verdict func(*pcie.Device) p2pdma.Verdict) {
	best, dist := pathclass.SYS+1, 0
	var near []*pcie.Device
	for _, n := range devs {
		if !n.IsNIC() {
			continue
		}
		c, d := pathclass.NCCL(g, n).Class, verdict(n).Distance
		switch {
		case c < best || (c == best && d < dist):
			best, dist, near = c, d, []*pcie.Device{n}
		case c == best && d == dist:
			near = append(near, n)
		}
	}
	if !pathclass.NCCLGDRByDefault(best) {
		return
	}
	for _, n := range near {
		m.gdr = append(m.gdr, gdrPair{gpu: g, nic: n, class: best, v: verdict(n)})
	}
}

// file puts a pair where its path turns.
func (m *dotModel) file(tr turn) {
	if c := tr.v.Common; c != nil {
		if d := m.t.Device(*c); d != nil {
			m.turns[d] = append(m.turns[d], tr)
			return
		}
	}
	ha, hb := tr.a.HostBridge, tr.b.HostBridge
	switch {
	case ha != nil && ha == hb:
		m.hbTurns[ha] = append(m.hbTurns[ha], tr)
	case numaOfHost(ha) == numaOfHost(hb):
		m.numaTurns[numaOfHost(ha)] = append(m.numaTurns[numaOfHost(ha)], tr)
	default:
		m.sysTurns = append(m.sysTurns, tr)
	}
}

// numaOfHost is the NUMA node of a host bridge's root-bus functions, -1 when
// none says.
func numaOfHost(h *pcie.HostBridge) int {
	if h == nil {
		return -1
	}
	for _, d := range h.Devices {
		if d.NUMANode != nil {
			return *d.NUMANode
		}
	}
	return -1
}

// severity orders map types from best to worst.
func severity(m p2pdma.MapType) int {
	switch m {
	case p2pdma.BusAddr:
		return 0
	case p2pdma.ThruHostBridge:
		return 1
	case p2pdma.Unknown:
		return 2
	}
	return 3 // not-supported
}

// verdictColor is the colour of a map type: green bus-addr, orange
// thru-host-bridge, red not-supported, grey unknown.
func verdictColor(mt p2pdma.MapType) string {
	switch mt {
	case p2pdma.BusAddr:
		return "green3"
	case p2pdma.ThruHostBridge:
		return "orange"
	case p2pdma.Unknown:
		return "grey60"
	}
	return "red"
}

// verdictFill is a light background of the same meaning.
func verdictFill(mt p2pdma.MapType) string {
	switch mt {
	case p2pdma.BusAddr:
		return "#d9f7d9"
	case p2pdma.ThruHostBridge:
		return "#ffe3b3"
	case p2pdma.Unknown:
		return "#e6e6e6"
	}
	return "#ffc7c7"
}

// worstOf is the worst map type among turns.
func worstOf(ts []turn) p2pdma.MapType {
	w := p2pdma.BusAddr
	for _, t := range ts {
		if severity(t.v.MapType) > severity(w) {
			w = t.v.MapType
		}
	}
	return w
}

// name is a device of interest's label, or its address.
func (m *dotModel) name(d *pcie.Device) string {
	if e, ok := m.labels[d]; ok {
		return e.Label
	}
	return d.Address.String()
}

// turnLines says what the pairs of ts get: each pair when there are few, else
// the count per verdict; then how many of them changed, with marks.
func (m *dotModel) turnLines(ts []turn) []string {
	var out []string
	if len(ts) <= 3 {
		for _, t := range ts {
			out = append(out, m.name(t.a)+" ↔ "+m.name(t.b)+": "+verdictShort(t.v))
		}
	} else {
		count := map[p2pdma.MapType]int{}
		var types []p2pdma.MapType
		for _, t := range ts {
			if count[t.v.MapType] == 0 {
				types = append(types, t.v.MapType)
			}
			count[t.v.MapType]++
		}
		slices.SortFunc(types, func(a, b p2pdma.MapType) int { return cmp.Compare(severity(a), severity(b)) })
		for _, mt := range types {
			out = append(out, fmt.Sprintf("%d pairs: %s", count[mt], mt))
		}
	}
	if n, note := m.changedTurns(ts); n > 0 {
		out = append(out, fmt.Sprintf("Δ %d changed: %s", n, note))
	}
	return out
}

// verdictShort is a verdict with the reason that matters most in a picture: the
// bridges with ACS redirect set.
func verdictShort(v p2pdma.Verdict) string {
	s := v.MapType.String()
	if len(v.ACSRedirect) > 0 {
		s += " (ACS redirect)"
	}
	return s
}

// changedTurns counts the pairs among ts that marks name, either direction, and
// returns the first one's note.
func (m *dotModel) changedTurns(ts []turn) (int, string) {
	n, note := 0, ""
	for _, t := range ts {
		s, ok := m.pairMark(t.a, t.b)
		if ok {
			if n == 0 {
				note = s
			}
			n++
		}
	}
	return n, note
}

func (m *dotModel) pairMark(a, b *pcie.Device) (string, bool) {
	if s, ok := m.marks.Pairs[[2]pcie.Address{a.Address, b.Address}]; ok {
		return s, true
	}
	s, ok := m.marks.Pairs[[2]pcie.Address{b.Address, a.Address}]
	return s, ok
}

// hostNUMA groups the host bridges by NUMA node, in node order (-1 last).
func hostNUMA(t *pcie.Topology) (nodes []int, by map[int][]*pcie.HostBridge) {
	by = map[int][]*pcie.HostBridge{}
	for _, h := range t.HostBridges {
		n := numaOfHost(h)
		if by[n] == nil {
			nodes = append(nodes, n)
		}
		by[n] = append(by[n], h)
	}
	slices.SortFunc(nodes, func(a, b int) int {
		if (a < 0) != (b < 0) {
			return cmp.Compare(b, a) // -1 last
		}
		return cmp.Compare(a, b)
	})
	return nodes, by
}

// nvlinkEdges returns the NVLinks NVML reports: between two GPUs of t (each pair
// once, with its link count) and from each GPU into the NVSwitch fabric.
func nvlinkEdges(t *pcie.Topology, nv *gpu.Facts) (direct map[[2]*pcie.Device]int, fabric map[*pcie.Device]int) {
	direct, fabric = map[[2]*pcie.Device]int{}, map[*pcie.Device]int{}
	if nv == nil {
		return direct, fabric
	}
	for _, g := range nv.GPUs {
		if g.Address == nil || g.NVLink == nil {
			continue
		}
		a := t.Device(*g.Address)
		if a == nil {
			continue
		}
		for _, l := range g.NVLink.Links {
			switch {
			case l.RemoteType == "switch":
				fabric[a]++
			case l.Remote != nil:
				if b := t.Device(*l.Remote); b != nil && a.Address.Compare(b.Address) < 0 {
					direct[[2]*pcie.Device{a, b}]++
				}
			}
		}
	}
	return direct, fabric
}

// linkLabel is the link a child has toward its parent, as lspci prints it, with
// a downgrade marked: "Gen4 x8 ↓ (Gen5 x16)".
func linkLabel(d *pcie.Device) (text string, downgraded bool) {
	l := d.Link()
	if !l.Current.Known() {
		return "", false
	}
	text = l.Current.String()
	if down, ok := d.LinkDowngraded(); ok && down {
		return text + " ↓ (" + l.Max.String() + ")", true
	}
	return text, false
}

// productName is a device's name from pci.ids, short: the device name alone
// where pci.ids has one.
func productName(d *pcie.Device) string {
	if d.DeviceName != "" {
		return d.DeviceName
	}
	return deviceName(d)
}

// marked is a device's change notes, "" when none.
func (m *dotModel) marked(d *pcie.Device) string {
	return strings.Join(m.marks.Devices[d.Address], "; ")
}
