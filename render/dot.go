package render

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/matrix"
	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pcie"
)

// TopoDot writes the tree as a Graphviz digraph (https://graphviz.org/doc/info/lang.html)
// that stays readable on a node of a thousand functions: host bridges, every bridge,
// and the devices of interest (matrix.RoleOf) are drawn; a PF's VFs are folded into
// its label, and the other functions below a parent into one "N other functions"
// box. Each link is coloured by the worst kernel verdict (p2pdma) among the pairs of
// devices of interest whose path uses it: green bus-addr, orange thru-host-bridge,
// red not-supported, grey dashed unknown; black where no such pair passes.
func TopoDot(w io.Writer, t *pcie.Topology, plat p2pdma.Platform) error {
	entries := matrix.Label(t.Devices)
	label := map[*pcie.Device]matrix.Entry{}
	var devs []*pcie.Device
	for _, e := range entries {
		label[e.Device] = e
		devs = append(devs, e.Device)
	}
	// worst[d] is the worst verdict among pairs whose path uses the link from d up to
	// its parent (or its host bridge).
	worst := map[*pcie.Device]p2pdma.MapType{}
	mark := func(d *pcie.Device, m p2pdma.MapType) {
		if old, ok := worst[d]; !ok || severity(m) > severity(old) {
			worst[d] = m
		}
	}
	calc := p2pdma.NewCalculator(t, plat)
	for e, v := range calc.AllEnds(devs) {
		v = calc.CheckComplete(v, e.Provider, e.Client)
		for _, end := range []*pcie.Device{e.Provider, e.Client} {
			for x := end; x != nil && (v.Common == nil || x.Address != *v.Common); x = x.Parent {
				mark(x, v.MapType)
			}
		}
	}

	p := newPrinter(w)
	p.line("digraph pcie {")
	p.line(`  graph [rankdir=LR, fontname="Helvetica", label="links: green bus-addr, orange thru-host-bridge, red not-supported, grey unknown (the kernel's verdict between the devices of interest they join)", labelloc=t];`)
	p.line(`  node [fontname="Helvetica", fontsize=10];`)
	p.line(`  edge [arrowhead=none];`)
	g := &dotWriter{p: p, label: label, worst: worst, drawn: map[*pcie.Device]bool{}}
	for _, hb := range t.HostBridges {
		p.line(fmt.Sprintf("  %s [shape=box3d, label=%s];", dotID(hb.Name), dotString(hb.Name+"\nhost bridge")))
		g.children(dotID(hb.Name), hb.Devices)
	}
	// As in TopoText, the functions no host bridge reaches hang below one node.
	if unattached := unattached(t, g.drawn); len(unattached) > 0 {
		p.line(`  "unattached" [shape=box, style=dashed, label="unattached: no host bridge reaches them"];`)
		g.children(`"unattached"`, unattached)
	}
	p.line("}")
	return p.done()
}

// dotWriter is what writing the graph's nodes needs.
type dotWriter struct {
	p     *printer
	label map[*pcie.Device]matrix.Entry
	worst map[*pcie.Device]p2pdma.MapType
	drawn map[*pcie.Device]bool // also marks the functions folded into a box
}

// children writes the functions below one parent and, recursively, below them.
func (g *dotWriter) children(parent string, children []*pcie.Device) {
	others := 0
	for _, d := range children {
		if g.drawn[d] {
			continue // a loop the tree builder did not cut
		}
		g.drawn[d] = true
		e, interesting := g.label[d]
		switch {
		case d.IsVF():
			continue // folded into the PF's label
		case d.IsBridge():
			text := d.Address.String()
			if pt, ok := d.PortType(); ok {
				text += "\n" + pt.String()
			}
			g.p.line(fmt.Sprintf("  %s [shape=ellipse, label=%s];", dotID(d.Address.String()), dotString(text)))
		case interesting:
			text := e.Label + " " + d.Address.String() + "\n" + deviceName(d)
			if n := len(d.VFs); n > 0 {
				text += "\n+" + strconv.Itoa(n) + " VFs"
			}
			g.p.line(fmt.Sprintf("  %s [shape=box, style=filled, fillcolor=%s, label=%s];", dotID(d.Address.String()), roleColor(e.Role), dotString(text)))
		default:
			others++
			g.children(parent, d.Children) // a type-0 function has none; keep any
			continue
		}
		g.p.line("  " + parent + " -> " + dotID(d.Address.String()) + edgeStyle(g.worst, d) + ";")
		g.children(dotID(d.Address.String()), d.Children)
	}
	if others > 0 {
		id := dotID(strings.Trim(parent, `"`) + "/others")
		word := "functions"
		if others == 1 {
			word = "function"
		}
		g.p.line(fmt.Sprintf("  %s [shape=box, style=dashed, label=%s];", id, dotString(strconv.Itoa(others)+" other "+word)))
		g.p.line("  " + parent + " -> " + id + ";")
	}
}

// severity orders map types from best to worst for colouring a shared link.
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

func edgeStyle(worst map[*pcie.Device]p2pdma.MapType, d *pcie.Device) string {
	m, ok := worst[d]
	if !ok {
		return ""
	}
	switch m {
	case p2pdma.BusAddr:
		return ` [color=green3, penwidth=2, tooltip="bus-addr"]`
	case p2pdma.ThruHostBridge:
		return ` [color=orange, penwidth=2, tooltip="thru-host-bridge"]`
	case p2pdma.Unknown:
		return ` [color=grey50, style=dashed, penwidth=2, tooltip="unknown"]`
	}
	return ` [color=red, penwidth=2, tooltip="not-supported"]`
}

func roleColor(r matrix.Role) string {
	switch r {
	case matrix.GPU:
		return "palegreen"
	case matrix.NIC:
		return "lightblue"
	case matrix.NVMe:
		return "khaki"
	case matrix.Accelerator:
		return "plum"
	}
	return "lightgrey"
}

// dotID quotes an identifier.
func dotID(s string) string { return dotString(s) }

// dotString is s as a DOT quoted string: control characters escaped for a terminal
// first (Escape), then quotes and backslashes escaped, newlines as \n.
func dotString(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		l = Escape(l)
		l = strings.ReplaceAll(l, `\`, `\\`)
		lines[i] = strings.ReplaceAll(l, `"`, `\"`)
	}
	return `"` + strings.Join(lines, `\n`) + `"`
}
