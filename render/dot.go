package render

import (
	"fmt"
	"html"
	"io"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/drift"
	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/matrix"
	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pcie"
)

// markColor marks what changed in a diff picture.
const markColor = "#c0008f"

// TopoDot writes a Graphviz digraph (https://graphviz.org/doc/info/lang.html) of
// what decides peer-to-peer DMA on the machine, readable on a DGX/HGX-sized node
// and bounded on a thousand functions:
//
//   - NUMA nodes and host bridges are clusters; the functions drawn are the
//     devices of interest (matrix.RoleOf) and the bridges above them, the others
//     counted on the function above them, a PF's VFs on its label;
//   - a switch is one table: its upstream port, the pairs whose path turns there
//     (the kernel's common upstream bridge, calc_map_type_and_dist() in
//     drivers/pci/p2pdma.c) with their verdict as its colour, and a row per
//     downstream port; a bridge with ACS redirect set is marked "ACS RR CR" in
//     red (pci_bridge_has_acs_redir());
//   - each link is labelled with its speed and width as lspci shows them, a
//     downgraded one in red with the capability beside it;
//   - the pairs that cross a root complex, the host bridges of a NUMA node, or
//     the NUMA nodes are summed on the cluster (or the legend) they cross;
//   - each GPU is joined (dashed) to the NICs nearest to it within NCCL's
//     default GPUDirect RDMA level, coloured by the kernel's verdict for the NIC
//     writing the GPU's memory; NVLinks from NVML (nv, nil when unknown) are
//     purple, into one NVSwitch fabric node when the GPUs reach switches;
//   - a legend says what the colours mean.
//
// The tree is written in address order with ordering=out, so dot's rank order
// draws it without crossings; the GPUDirect and NVLink edges do not constrain
// the ranks.
func TopoDot(w io.Writer, t *pcie.Topology, plat p2pdma.Platform, nv *gpu.Facts) error {
	return writeDot(w, newDotModel(t, plat, nv, DotMarks{}), "p2pcheck topo: what decides peer-to-peer DMA here")
}

// DiffDot writes the golden machine's picture (TopoDot) with what the comparison
// r found marked in magenta with "Δ": changed facts on their device, devices the
// node lacks dashed, changed pairs where their path turns and on their GPUDirect
// edge, and the node-wide changes in the legend.
func DiffDot(w io.Writer, t *pcie.Topology, plat p2pdma.Platform, nv *gpu.Facts, r DiffReport) error {
	title := "p2pcheck diff: the golden " + r.Golden.Source + ", with what differs on " + r.Node.Source + " marked Δ"
	return writeDot(w, newDotModel(t, plat, nv, diffMarks(r)), title)
}

// diffMarks turns a comparison into marks on the golden's functions.
func diffMarks(r DiffReport) DotMarks {
	m := DotMarks{Devices: map[pcie.Address][]string{}, Missing: map[pcie.Address]string{}, Pairs: map[[2]pcie.Address]string{}}
	for _, c := range r.Changes {
		gv, nv := c.Golden, c.Node
		if c.Kind == drift.ACS {
			gv, nv = changedWords(gv, nv)
		}
		what := c.Fact + " " + gv + " → " + nv
		if c.Kind == drift.ACS && c.Note != "" {
			what = c.Note
		}
		switch {
		case c.Device == nil:
			m.Notes = append(m.Notes, what)
		case c.What == "added" || c.Device.Golden == nil:
			m.Notes = append(m.Notes, "added on the node: "+endName(c.Device)+" at "+c.Device.Place)
		case c.What == "missing":
			m.Missing[*c.Device.Golden] = "missing on the node"
		case c.What == "moved":
			m.Devices[*c.Device.Golden] = append(m.Devices[*c.Device.Golden], "moved to "+c.Node)
		case c.Peer != nil && c.Peer.Golden != nil:
			m.Pairs[[2]pcie.Address{*c.Device.Golden, *c.Peer.Golden}] = what
		default:
			m.Devices[*c.Device.Golden] = append(m.Devices[*c.Device.Golden], what)
		}
	}
	return m
}

// dotWriter writes a model.
type dotWriter struct {
	*dotModel
	p *printer
}

func writeDot(w io.Writer, m *dotModel, title string) error {
	g := &dotWriter{dotModel: m, p: newPrinter(w)}
	g.p.line("digraph pcie {")
	g.p.line(`  graph [rankdir=LR, ordering=out, newrank=true, fontname="Helvetica", fontsize=10, nodesep=0.08, ranksep=0.3, labelloc=t, labeljust=l, label=<` + g.legend(title) + `>];`)
	g.p.line(`  node [fontname="Helvetica", fontsize=10, margin="0.06,0.03"];`)
	g.p.line(`  edge [fontname="Helvetica", fontsize=9, arrowhead=none];`)
	nodes, by := hostNUMA(m.t)
	for _, n := range nodes {
		g.numaCluster(n, by[n])
	}
	g.order(nodes, by)
	g.extraEdges()
	g.p.line("}")
	return g.p.done()
}

// order ties the first function drawn of every host bridge to one invisible
// node, in NUMA and then host-bridge order: with ordering=out, dot keeps the
// clusters in that order from top to bottom instead of choosing its own.
func (g *dotWriter) order(nodes []int, by map[int][]*pcie.HostBridge) {
	g.p.line(`  "order" [shape=point, style=invis, width=0];`)
	for _, n := range nodes {
		for _, h := range by[n] {
			for _, d := range h.Devices {
				if g.drawn[d] {
					g.p.line(`  "order" -> ` + dotID(d.Address.String()) + ` [style=invis];`)
					break
				}
			}
		}
	}
}

// numaCluster writes one NUMA node and its host bridges.
func (g *dotWriter) numaCluster(n int, hbs []*pcie.HostBridge) {
	name := "NUMA node " + strconv.Itoa(n)
	if n < 0 {
		name = "NUMA node unknown"
	}
	label := []string{"<B>" + htmlText(name) + "</B>"}
	for _, h := range hbs {
		if !g.anyDrawn(h.Devices) {
			label = append(label, htmlText(h.Name+": no device of interest, "+strings.TrimPrefix(othersText(g.hbOthers[h]), "+")))
		}
	}
	if ts := g.numaTurns[n]; len(ts) > 0 {
		for _, l := range g.turnLines(ts) {
			label = append(label, htmlText("between its host bridges: "+l))
		}
	}
	g.p.line(fmt.Sprintf(`  subgraph %s {`, dotID("cluster_numa_"+strconv.Itoa(n))))
	g.p.line(`    graph [style="rounded,dashed", color=grey50, label=<` + strings.Join(label, `<BR ALIGN="LEFT"/>`) + `<BR ALIGN="LEFT"/>>];`)
	for _, h := range hbs {
		if g.anyDrawn(h.Devices) {
			g.hostCluster(h)
		}
	}
	g.p.line("  }")
}

// hostCluster writes one host bridge's root complex and the tree below it.
func (g *dotWriter) hostCluster(h *pcie.HostBridge) {
	label := []string{"<B>" + htmlText(h.Name) + "</B> host bridge"}
	if f := h.FirstDevice(); f != nil {
		label[0] += htmlText(fmt.Sprintf(" [%04x:%04x]", f.Vendor, f.Record.Device))
	}
	if n := g.hbOthers[h]; n > 0 {
		label[0] += htmlText(" · " + othersText(n))
	}
	if ts := g.hbTurns[h]; len(ts) > 0 {
		for _, l := range g.turnLines(ts) {
			label = append(label, htmlText("through the root complex: "+l))
		}
	}
	g.p.line(fmt.Sprintf(`    subgraph %s {`, dotID("cluster_"+h.Name)))
	color := "grey70"
	if len(g.hbTurns[h]) > 0 {
		color = verdictColor(worstOf(g.hbTurns[h]))
	}
	g.p.line(`      graph [style=rounded, color=` + color + `, label=<` + strings.Join(label, `<BR ALIGN="LEFT"/>`) + `<BR ALIGN="LEFT"/>>];`)
	for _, d := range h.Devices {
		if g.drawn[d] {
			g.device(d, "", "")
		}
	}
	g.p.line("    }")
}

func (g *dotWriter) anyDrawn(ds []*pcie.Device) bool {
	for _, d := range ds {
		if g.drawn[d] {
			return true
		}
	}
	return false
}

func othersText(n int) string {
	if n == 1 {
		return "+1 other function"
	}
	return "+" + strconv.Itoa(n) + " other functions"
}

// device writes d (a drawn function) and everything drawn below it; from, when
// not empty, is the node or port its link comes from.
func (g *dotWriter) device(d *pcie.Device, from, indent string) {
	id := dotID(d.Address.String())
	switch {
	case g.switches[d] != nil:
		g.switchTable(g.switches[d])
	case d.IsBridge():
		g.bridgeNode(d)
	default:
		g.endpointNode(d)
	}
	if from != "" {
		g.edge(from, id, d)
	}
	if s := g.switches[d]; s != nil {
		for i, p := range g.drawnPorts(s) {
			for _, c := range p.Children {
				if g.drawn[c] {
					g.device(c, id+":p"+strconv.Itoa(i)+":e", indent)
				}
			}
		}
		return
	}
	for _, c := range d.Children {
		if g.drawn[c] {
			g.device(c, id, indent)
		}
	}
}

// drawnPorts are the downstream ports of s with a drawn function below them.
func (g *dotWriter) drawnPorts(s *pcie.Switch) []*pcie.Device {
	var out []*pcie.Device
	for _, p := range s.Downstream {
		if g.drawn[p] {
			out = append(out, p)
		}
	}
	return out
}

// edge writes the link from a parent (or its port) to d.
func (g *dotWriter) edge(from, to string, d *pcie.Device) {
	text, down := linkLabel(d)
	attrs := []string{}
	switch {
	case down:
		attrs = append(attrs, `color=red`, `penwidth=2.5`, `fontcolor=red`, `label=`+dotString(text))
	case text != "":
		attrs = append(attrs, `label=`+dotString(text))
	}
	if _, ok := g.marks.Missing[d.Address]; ok {
		attrs = append(attrs, `style=dashed`)
	}
	line := "      " + from + " -> " + to
	if len(attrs) > 0 {
		line += " [" + strings.Join(attrs, ", ") + "]"
	}
	g.p.line(line + ";")
}

// acsMark is a bridge's ACS redirect in words: "ACS RR CR" when set, "ACS ?"
// when ACS Control could not be read, "" otherwise.
func acsMark(d *pcie.Device) string {
	acs, ok := d.ACS()
	switch {
	case !ok:
		return "ACS ?"
	case acs != nil && acs.Control&p2pdma.RedirectMask != 0:
		return "ACS " + drift.RedirectWords(acs.Control)
	}
	return ""
}

// acsCell is the HTML of acsMark: red when redirect is set, grey when unknown.
func acsCell(d *pcie.Device) string {
	switch s := acsMark(d); s {
	case "":
		return ""
	case "ACS ?":
		return ` · <FONT COLOR="grey40">ACS ? (not read)</FONT>`
	default:
		return ` · <FONT COLOR="red"><B>` + htmlText(s) + `</B></FONT>`
	}
}

// switchTable writes a switch as one table: header, the pairs turning at its
// upstream port, one row per drawn downstream port (PORT p0, p1, ...).
func (g *dotWriter) switchTable(s *pcie.Switch) {
	up := s.Upstream
	head, fill := `<B>switch</B> `+htmlText(up.Address.String())+acsCell(up)+` <FONT POINT-SIZE="8">`+htmlText(productName(up))+`</FONT>`, "grey90"
	if ts := g.turns[up]; len(ts) > 0 {
		head += `<BR/>turn here: ` + htmlLines(g.turnLines(ts))
		fill = verdictFill(worstOf(ts))
	}
	rows := []string{`<TR><TD BGCOLOR="` + fill + `">` + head + `</TD></TR>`}
	for i, p := range g.drawnPorts(s) {
		const br = `<BR ALIGN="LEFT"/>`
		cell := htmlText(p.Address.String()) + acsCell(p)
		if ts := g.turns[p]; len(ts) > 0 {
			cell += br + `turn here: ` + strings.ReplaceAll(htmlLines(g.turnLines(ts)), "<BR/>", br)
		}
		if n := g.others[p]; n > 0 {
			cell += br + htmlText(othersText(n))
		}
		if note := g.marked(p); note != "" {
			cell += br + `<FONT COLOR="` + markColor + `">Δ ` + htmlText(note) + `</FONT>`
		}
		cell += br
		attrs := ` PORT="p` + strconv.Itoa(i) + `" ALIGN="LEFT"`
		if g.marked(p) != "" {
			attrs += ` COLOR="` + markColor + `"`
		}
		rows = append(rows, `<TR><TD`+attrs+`>`+cell+`</TD></TR>`)
	}
	if unused := len(s.Downstream) - len(g.drawnPorts(s)) + g.others[up]; unused > 0 {
		rows = append(rows, `<TR><TD><FONT COLOR="grey40">`+htmlText(fmt.Sprintf("+%d other ports and functions", unused))+`</FONT></TD></TR>`)
	}
	if note := g.marked(up); note != "" {
		rows = append(rows, `<TR><TD><FONT COLOR="`+markColor+`">Δ `+htmlText(note)+`</FONT></TD></TR>`)
	}
	border := ""
	if g.marked(up) != "" {
		border = ` COLOR="` + markColor + `"`
	}
	g.p.line(fmt.Sprintf(`      %s [shape=plaintext, label=<<TABLE BORDER="1"%s CELLBORDER="1" CELLSPACING="0" CELLPADDING="3">%s</TABLE>>];`,
		dotID(up.Address.String()), border, strings.Join(rows, "")))
}

// bridgeNode writes a root port or other bridge outside a switch.
func (g *dotWriter) bridgeNode(d *pcie.Device) {
	kind := "bridge"
	if pt, ok := d.PortType(); ok {
		kind = pt.String()
	}
	lines := []string{"<B>" + htmlText(kind) + "</B><BR/>" + htmlText(d.Address.String()) + acsCell(d)}
	fill := "white"
	if ts := g.turns[d]; len(ts) > 0 {
		lines = append(lines, "turn here: "+htmlLines(g.turnLines(ts)))
		fill = verdictFill(worstOf(ts))
	}
	if n := g.others[d]; n > 0 {
		lines = append(lines, htmlText(othersText(n)))
	}
	g.p.line(fmt.Sprintf(`      %s [shape=box, style="rounded,filled", fillcolor=%s%s, label=<%s>];`,
		dotID(d.Address.String()), dotString(fill), g.markAttrs(d), strings.Join(append(lines, g.markLines(d)...), "<BR/>")))
}

// endpointNode writes a device of interest.
func (g *dotWriter) endpointNode(d *pcie.Device) {
	e := g.labels[d]
	head := "<B>" + htmlText(e.Label) + "</B> " + htmlText(d.Address.String())
	if d.Driver != "" {
		head += htmlText(" · " + d.Driver)
	}
	lines := []string{head, `<FONT POINT-SIZE="9">` + htmlText(productName(d)) + `</FONT>`}
	var extra []string
	if n := len(d.VFs); n > 0 {
		extra = append(extra, "+"+strconv.Itoa(n)+" VFs")
	}
	if n := g.others[d]; n > 0 {
		extra = append(extra, othersText(n))
	}
	if len(extra) > 0 {
		lines = append(lines, htmlText(strings.Join(extra, " · ")))
	}
	lines = append(lines, g.gdrLines(d)...)
	style, fill := `"filled"`, roleColor(e.Role)
	if _, ok := g.marks.Missing[d.Address]; ok {
		style, fill = `"filled,dashed"`, "grey92"
	}
	g.p.line(fmt.Sprintf(`      %s [shape=box, style=%s, fillcolor=%s%s, label=<%s>];`,
		dotID(d.Address.String()), style, fill, g.markAttrs(d), strings.Join(append(lines, g.markLines(d)...), "<BR/>")))
}

// markAttrs outlines a marked function.
func (g *dotWriter) markAttrs(d *pcie.Device) string {
	_, missing := g.marks.Missing[d.Address]
	if g.marked(d) == "" && !missing {
		return ""
	}
	return `, color="` + markColor + `", penwidth=3`
}

// markLines are a function's change notes.
func (g *dotWriter) markLines(d *pcie.Device) []string {
	var out []string
	if s, ok := g.marks.Missing[d.Address]; ok {
		out = append(out, `<FONT COLOR="`+markColor+`">Δ `+htmlText(s)+`</FONT>`)
	}
	for _, s := range g.marks.Devices[d.Address] {
		out = append(out, `<FONT COLOR="`+markColor+`">Δ `+htmlText(s)+`</FONT>`)
	}
	return out
}

// extraEdges writes the GPUDirect RDMA pairs and the NVLinks, which do not
// constrain the ranks.
func (g *dotWriter) extraEdges() {
	for _, p := range g.gdr {
		// dot 2.43 loses labelled edges that do not constrain the ranks inside
		// clusters: the verdict is written on the NIC (gdrLines) instead.
		color := verdictColor(p.v.MapType)
		if _, ok := g.pairMark(p.gpu, p.nic); ok {
			color = `"` + markColor + `"`
		}
		g.p.line(fmt.Sprintf("  %s -> %s [style=dashed, constraint=false, penwidth=2, color=%s, tooltip=%s];",
			dotID(p.gpu.Address.String()), dotID(p.nic.Address.String()), color, dotString("GPUDirect RDMA: "+p.class.String()+", "+p.v.MapType.String())))
	}
	direct, fabric := nvlinkEdges(g.t, g.nv)
	if len(fabric) > 0 {
		g.p.line(`  "nvswitch" [shape=box, style="rounded,filled", fillcolor=plum, label="NVLink switch fabric"];`)
		for _, d := range g.t.Devices {
			if n := fabric[d]; n > 0 && g.drawn[d] {
				g.p.line(fmt.Sprintf(`  %s -> "nvswitch" [color=purple, penwidth=2, fontcolor=purple, label="NV%d"];`, dotID(d.Address.String()), n))
			}
		}
	}
	for _, d := range g.t.Devices {
		for _, e := range g.t.Devices {
			if n := direct[[2]*pcie.Device{d, e}]; n > 0 && g.drawn[d] && g.drawn[e] {
				g.p.line(fmt.Sprintf(`  %s -> %s [color=purple, penwidth=2, constraint=false, fontcolor=purple, label="NV%d"];`,
					dotID(d.Address.String()), dotID(e.Address.String()), n))
			}
		}
	}
}

// gdrLines say, on a NIC, what GPUDirect RDMA with its nearest GPUs gets: NCCL's
// path class and the kernel's verdict, in the verdict's colour.
func (g *dotWriter) gdrLines(nic *pcie.Device) []string {
	var out []string
	for _, p := range g.gdr {
		if p.nic != nic {
			continue
		}
		text := "GDR " + g.name(p.gpu) + ": " + p.class.String() + " · " + verdictShort(p.v)
		out = append(out, `<FONT COLOR="`+fontColor(p.v.MapType)+`">`+htmlText(text)+`</FONT>`)
		if note, ok := g.pairMark(p.gpu, p.nic); ok {
			out = append(out, `<FONT COLOR="`+markColor+`">Δ `+htmlText(note)+`</FONT>`)
		}
	}
	return out
}

// fontColor is a verdict's colour dark enough for text.
func fontColor(mt p2pdma.MapType) string {
	switch mt {
	case p2pdma.BusAddr:
		return "darkgreen"
	case p2pdma.ThruHostBridge:
		return "darkorange3"
	case p2pdma.Unknown:
		return "grey40"
	}
	return "red3"
}

// maxNotes bounds the diff notes the legend lists.
const maxNotes = 12

// legend is the graph's label: the title, what the colours and marks mean,
// the pairs between NUMA nodes, and a diff's node-wide changes.
func (g *dotWriter) legend(title string) string {
	cell := func(bg, text string) string { return `<TD BGCOLOR="` + bg + `">` + text + `</TD>` }
	rows := []string{
		`<TR><TD COLSPAN="4" ALIGN="LEFT"><B>` + htmlText(title) + `</B> ` + htmlText("(a switch takes the colour of the worst kernel verdict, drivers/pci/p2pdma.c, of the pairs whose path turns there)") + `</TD></TR>`,
		`<TR>` + cell(verdictFill(p2pdma.BusAddr), "bus-addr: P2P through the switch") +
			cell(verdictFill(p2pdma.ThruHostBridge), "thru-host-bridge: via the root complex") +
			cell(verdictFill(p2pdma.NotSupported), "not-supported: no P2PDMA") +
			cell(verdictFill(p2pdma.Unknown), "unknown: a fact was not read") + `</TR>`,
		`<TR>` + cell("white", `<FONT COLOR="red"><B>ACS RR CR</B></FONT>: ACS redirect set`) +
			cell("white", `<FONT COLOR="red">Gen4 x8 ↓ (Gen5 x16)</FONT>: downgraded link`) +
			cell("white", "- - GDR: a GPU and its nearest NIC") +
			cell("white", `<FONT COLOR="purple">NV#</FONT>: NVLinks (NVML)`) + `</TR>`,
	}
	if g.pairsNote != "" {
		rows = append(rows, `<TR><TD COLSPAN="4" ALIGN="LEFT">`+htmlText(g.pairsNote)+`</TD></TR>`)
	}
	if len(g.sysTurns) > 0 {
		rows = append(rows, `<TR><TD COLSPAN="4" ALIGN="LEFT" BGCOLOR="`+verdictFill(worstOf(g.sysTurns))+`">between NUMA nodes: `+htmlLines(g.turnLines(g.sysTurns))+`</TD></TR>`)
	}
	notes := g.marks.Notes
	if len(notes) > maxNotes {
		notes = append(notes[:maxNotes:maxNotes], fmt.Sprintf("... and %d more (p2pcheck diff --format text lists them)", len(g.marks.Notes)-maxNotes))
	}
	for _, n := range notes {
		rows = append(rows, `<TR><TD COLSPAN="4" ALIGN="LEFT"><FONT COLOR="`+markColor+`">Δ `+htmlText(n)+`</FONT></TD></TR>`)
	}
	return `<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3">` + strings.Join(rows, "") + `</TABLE>`
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

// htmlText is s for a Graphviz HTML-like label: control characters escaped for
// a terminal first (Escape), then the HTML specials.
func htmlText(s string) string { return html.EscapeString(Escape(s)) }

// htmlLines joins escaped lines with line breaks.
func htmlLines(lines []string) string {
	esc := make([]string, len(lines))
	for i, l := range lines {
		esc[i] = htmlText(l)
	}
	return strings.Join(esc, "<BR/>")
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
