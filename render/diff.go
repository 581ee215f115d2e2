package render

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/drift"
	"github.com/p2pkit/p2pkit/pcie"
)

// DiffSchemaVersion is the version of the diff JSON (schema/diff.v1.json), single
// and fleet form alike.
const DiffSchemaVersion = "1"

// DiffSide names one side of a comparison.
type DiffSide struct {
	// Source says what was read: "snapshot FILE", "root DIR", "this machine".
	Source    string `json:"source"`
	Signature string `json:"signature"`
}

// DiffReport is one comparison, as p2pcheck diff prints it.
type DiffReport struct {
	SchemaVersion string             `json:"schema_version"`
	Golden        DiffSide           `json:"golden"`
	Node          DiffSide           `json:"node"`
	Outcome       drift.Outcome      `json:"outcome"`
	ExitCode      int                `json:"exit_code"`
	Counts        map[drift.Kind]int `json:"counts"`
	drift.Result
}

// NewDiffReport assembles the report of a comparison: every kind counted (0
// when nothing of it changed) and the exit code of its outcome.
func NewDiffReport(golden, node DiffSide, r drift.Result, failOnWarn bool) DiffReport {
	counts := r.Counts()
	for _, k := range drift.Kinds() {
		counts[k] += 0
	}
	o := r.Outcome()
	return DiffReport{SchemaVersion: DiffSchemaVersion, Golden: golden, Node: node, Outcome: o,
		ExitCode: o.ExitCode(failOnWarn), Counts: counts, Result: r}
}

// DiffJSON writes the report as JSON (schema/diff.v1.json).
func DiffJSON(w io.Writer, r DiffReport) error { return writeJSON(w, r) }

// kindTitles head each kind's changes with what it is about and what it breaks.
var kindTitles = map[drift.Kind]string{
	drift.Devices:  "devices (a device missing takes its peer pairs with it)",
	drift.Link:     "PCIe links (the bandwidth of every pair through them)",
	drift.ACS:      "ACS (redirect sends peer traffic up to the root complex)",
	drift.BAR:      "BARs (how much device memory peers and GDRCopy can map)",
	drift.IOMMU:    "IOMMU (translation and isolation of peer DMA)",
	drift.NUMA:     "NUMA placement (CPU and memory affinity)",
	drift.NVLink:   "NVLink (GPU peer traffic off PCIe)",
	drift.Versions: "versions (kernel, drivers, modules; IDs and revisions the firmware shows)",
	drift.Pairs:    "pairs (the kernel's P2PDMA verdict, the path class, NCCL's transport)",
	drift.Checks:   "checks (the node report's verdicts)",
}

// outcomeWords says an outcome in a sentence.
var outcomeWords = map[drift.Outcome]string{
	drift.OutcomeNone:    "no drift",
	drift.OutcomeWarn:    "drift that changes no verdict",
	drift.OutcomeUnknown: "could not compare what the golden records",
	drift.OutcomeVerdict: "drift that changes verdicts",
}

// DiffText writes the report for people: the two sides, then each kind's
// changes, identical changes of several devices on one line, then what could not
// be compared and the outcome with its exit code.
func DiffText(w io.Writer, r DiffReport) error {
	p := newPrinter(w)
	p.line("golden: " + Escape(r.Golden.Source) + " (signature " + r.Golden.Signature + ")")
	p.line("node:   " + Escape(r.Node.Source) + " (signature " + r.Node.Signature + ")")
	writeChanges(p, r.Result, "")
	p.line("")
	p.line(fmt.Sprintf("result: %s (exit %d)", outcomeWords[r.Outcome], r.ExitCode))
	return p.done()
}

// writeChanges writes the changes and gaps of one comparison, every line
// indented by indent.
func writeChanges(p *printer, r drift.Result, indent string) {
	for _, k := range drift.Kinds() {
		var of []drift.Change
		for _, c := range r.Changes {
			if c.Kind == k {
				of = append(of, c)
			}
		}
		if len(of) == 0 {
			continue
		}
		p.line("")
		p.line(indent + kindTitles[k] + ":")
		for _, l := range changeLines(of) {
			p.line(indent + "  " + Escape(l))
		}
	}
	if r.Omitted > 0 {
		p.line(indent + fmt.Sprintf("... and %d more changes (the first %d are shown)", r.Omitted, len(r.Changes)))
	}
	writeGaps(p, r.Gaps, indent)
}

// writeGaps lists what was not compared: each fact the node did not show on a
// line of its own, the others (the golden does not record them, or neither
// side does) in one line per side.
func writeGaps(p *printer, gaps []drift.Gap, indent string) {
	if len(gaps) == 0 {
		return
	}
	p.line("")
	p.line(indent + "not compared:")
	other := map[string][]string{}
	for _, g := range gaps {
		if g.Side == "node" {
			p.line(indent + "  " + Escape(gapLine(g)))
			continue
		}
		what := g.Fact
		if g.Count > 1 {
			what += fmt.Sprintf(" (%d)", g.Count)
		}
		other[g.Side] = append(other[g.Side], what+": "+g.Why)
	}
	for _, side := range []string{"golden", "both"} {
		if len(other[side]) > 0 {
			p.line(indent + "  " + sideWords[side] + ": " + Escape(strings.Join(other[side], "; ")))
		}
	}
}

var sideWords = map[string]string{"node": "not known on the node", "golden": "the golden does not record it", "both": "known on neither side"}

// changeGroup is changes that differ only in their device. roles and addrs
// are those of its devices without a label, to name them by role at once.
type changeGroup struct {
	first drift.Change
	ends  []string
	roles []drift.Role
	addrs []string
	nodes []string // the node's values, several for an IOMMU group that split
}

// changeLines turns the changes of one kind into lines: a change of one device
// on one line, the same change of several devices as one line with the devices
// listed below it.
func changeLines(cs []drift.Change) []string {
	var groups []*changeGroup
	byKey := map[string]*changeGroup{}
	pairs := map[[2]string]bool{}
	for _, c := range cs {
		if c.Peer != nil {
			pairs[[2]string{c.Device.Place + "|" + c.Fact + "|" + c.Golden + "|" + c.Node, c.Peer.Place}] = true
		}
	}
	for _, c := range cs {
		if c.Peer != nil && pairs[[2]string{c.Peer.Place + "|" + c.Fact + "|" + c.Golden + "|" + c.Node, c.Device.Place}] &&
			c.Peer.Place < c.Device.Place {
			continue // the other direction, already listed as ↔
		}
		key := c.What + "\x00" + c.Fact + "\x00" + c.Golden + "\x00" + c.Note
		switch {
		case c.Kind == drift.Devices && c.What != "changed":
			key += "\x00" + c.Device.Place // each device missing or added on its own line
		case c.Fact != drift.FactIOMMUGroup:
			key += "\x00" + c.Node // an IOMMU group on one line, whatever it became
		}
		g := byKey[key]
		if g == nil {
			g = &changeGroup{first: c}
			byKey[key] = g
			groups = append(groups, g)
		}
		if !slices.Contains(g.nodes, c.Node) {
			g.nodes = append(g.nodes, c.Node)
		}
		g.ends = append(g.ends, changeEnds(c, pairs))
		if c.Device != nil && c.Peer == nil && c.Device.Label == "" {
			g.roles = append(g.roles, c.Device.Role)
			g.addrs = append(g.addrs, addrText(c.Device))
		}
	}
	var out []string
	for _, g := range groups {
		out = append(out, groupLines(g)...)
	}
	return out
}

// changeEnds names the device or pair of a change ("" for a node-wide one).
func changeEnds(c drift.Change, pairs map[[2]string]bool) string {
	switch {
	case c.Device == nil:
		return ""
	case c.Peer == nil:
		return endName(c.Device)
	}
	arrow := " → "
	if pairs[[2]string{c.Peer.Place + "|" + c.Fact + "|" + c.Golden + "|" + c.Node, c.Device.Place}] {
		arrow = " ↔ "
	}
	return shortName(c.Device) + arrow + shortName(c.Peer)
}

// groupLines writes one group of identical changes.
func groupLines(g *changeGroup) []string {
	c := g.first
	var head string
	switch c.What {
	case "missing":
		head = "missing: " + endName(c.Device) + at(c.Device) + ", " + c.Golden
	case "added":
		head = "added: " + endName(c.Device) + at(c.Device) + ", " + c.Node
	case "moved":
		head = "moved: " + endName(c.Device) + " from " + c.Golden + " to " + c.Node
	default:
		gv, nv := c.Golden, c.Node
		if c.Kind == drift.ACS {
			gv, nv = changedWords(gv, nv)
		}
		if c.Fact == drift.FactIOMMUGroup {
			return []string{c.Fact + " of " + gv + " → " + strings.Join(g.nodes, "; ")}
		}
		head = c.Fact + " " + gv + " → " + nv
	}
	if c.Note != "" && c.What != "moved" {
		head += " (" + c.Note + ")"
	}
	if c.Device == nil {
		return []string{head}
	}
	if len(g.ends) == 1 && (c.What == "changed") {
		return []string{g.ends[0] + ": " + head}
	}
	if c.What != "changed" {
		return []string{head}
	}
	what, ends := "devices", g.ends
	switch {
	case c.Peer != nil:
		what = "pairs"
	case sameRole(g.roles) && len(g.roles) == len(g.ends):
		what, ends = plural(roleWords[g.roles[0]]), slices.Sorted(slices.Values(g.addrs))
	}
	return append([]string{head}, wrapList("  "+strconv.Itoa(len(ends))+" "+what+": ", ends, 100)...)
}

func sameRole(rs []drift.Role) bool {
	for _, r := range rs {
		if r != rs[0] {
			return false
		}
	}
	return len(rs) > 0
}

func plural(w string) string {
	switch {
	case strings.HasSuffix(w, "ch"):
		return w + "es"
	case strings.HasSuffix(w, "s"):
		return w
	}
	return w + "s"
}

// at names a device's place where its address does not say it.
func at(e *drift.End) string {
	for _, a := range []*pcie.Address{e.Golden, e.Node} {
		if a != nil && a.String() == e.Place {
			return ""
		}
	}
	return " at " + e.Place
}

// wrapList writes items after prefix, comma-separated, in lines of at most width
// characters; continuation lines are indented under the first item.
func wrapList(prefix string, items []string, width int) []string {
	var out []string
	line := prefix
	pad := strings.Repeat(" ", len(prefix))
	for i, it := range items {
		sep := ", "
		if i == len(items)-1 {
			sep = ""
		}
		if len(line)+len(it) > width && line != prefix && line != pad {
			out = append(out, strings.TrimRight(line, " "))
			line = pad
		}
		line += it + sep
	}
	return append(out, line)
}

// changedWords keeps the words of two lists of equal length that differ, for ACS
// Control as lspci prints it ("SrcValid- ReqRedir- → SrcValid+ ReqRedir+").
func changedWords(a, b string) (string, string) {
	wa, wb := strings.Fields(a), strings.Fields(b)
	if len(wa) != len(wb) {
		return a, b
	}
	var ka, kb []string
	for i := range wa {
		if wa[i] != wb[i] {
			ka, kb = append(ka, wa[i]), append(kb, wb[i])
		}
	}
	return strings.Join(ka, " "), strings.Join(kb, " ")
}

// roleWords are the roles as text names them.
var roleWords = map[drift.Role]string{
	drift.RoleSwitch: "switch", drift.RoleSwitchPort: "switch port", drift.RoleRootPort: "root port",
	drift.RoleBridge: "bridge", drift.RoleOther: "function", drift.RoleRDMANIC: "NIC", drift.RoleNIC: "NIC",
	drift.RoleGPU: "GPU", drift.RoleNVMe: "NVMe", drift.RoleAccelerator: "accelerator", drift.RoleP2PMem: "p2pmem provider",
}

// shortName is a device's label, or its role and address.
func shortName(e *drift.End) string {
	if e.Label != "" {
		return e.Label
	}
	return endName(e)
}

// endName is a device's label or role, and its address (addrText).
func endName(e *drift.End) string {
	name := e.Label
	if name == "" {
		name = roleWords[e.Role]
	}
	return name + " " + addrText(e)
}

// addrText is a device's address: the node's where it has one, with the
// golden's beside it when they differ.
func addrText(e *drift.End) string {
	switch {
	case e.Node != nil && e.Golden != nil && *e.Node != *e.Golden:
		return e.Node.String() + " (golden " + e.Golden.String() + ")"
	case e.Node != nil:
		return e.Node.String()
	case e.Golden != nil:
		return e.Golden.String()
	}
	return "at " + e.Place
}

// gapLine says what could not be compared.
func gapLine(g drift.Gap) string {
	of := ""
	switch {
	case g.Example != nil && g.Count == 1:
		of = " of " + endName(g.Example)
	case g.Example != nil:
		of = fmt.Sprintf(" of %d devices (%s, ...)", g.Count, shortName(g.Example))
	}
	where := sideWords[g.Side]
	line := g.Fact + of + ": " + where + ": " + g.Why
	if g.Blocking {
		line += " (the golden records it: the node cannot be shown to match)"
	}
	return line
}

// FleetGroup is one signature of a fleet in the report.
type FleetGroup struct {
	Signature string   `json:"signature"`
	Count     int      `json:"count"`
	Nodes     []string `json:"nodes"`
	// Majority is set on the first group when it holds more than half the nodes.
	Majority bool `json:"majority"`
	// Outcome, Counts and Result are what differs from the first group (empty for
	// the first group itself); Err says why a group could not be compared.
	Outcome drift.Outcome      `json:"outcome,omitempty"`
	Counts  map[drift.Kind]int `json:"counts,omitempty"`
	Err     string             `json:"error,omitempty"`
	*drift.Result
}

// FleetUnreadable is a node that could not be read.
type FleetUnreadable struct {
	Node string `json:"node"`
	Err  string `json:"error"`
}

// FleetReport is p2pcheck diff --fleet's report.
type FleetReport struct {
	SchemaVersion string            `json:"schema_version"`
	Nodes         int               `json:"nodes"`
	Groups        []FleetGroup      `json:"groups"`
	Unreadable    []FleetUnreadable `json:"unreadable"`
	Outcome       drift.Outcome     `json:"outcome"`
	ExitCode      int               `json:"exit_code"`
}

// NewFleetReport assembles the report of a fleet named by name: the outcome is
// the worst of its groups', and a node that could not be read makes it
// unknown unless a verdict changed.
func NewFleetReport(fr *drift.FleetResult, nodes int, name func(int) string, failOnWarn bool) FleetReport {
	rep := FleetReport{SchemaVersion: DiffSchemaVersion, Nodes: nodes, Groups: []FleetGroup{}, Unreadable: []FleetUnreadable{}, Outcome: drift.OutcomeNone}
	worse := func(o drift.Outcome) {
		if outcomeRank(o) > outcomeRank(rep.Outcome) {
			rep.Outcome = o
		}
	}
	for k, g := range fr.Groups {
		fg := FleetGroup{Signature: g.Signature.String(), Count: len(g.Nodes), Majority: k == 0 && fr.Majority, Err: g.Err, Result: g.Result}
		for _, i := range g.Nodes {
			fg.Nodes = append(fg.Nodes, name(i))
		}
		switch {
		case g.Result != nil:
			fg.Outcome, fg.Counts = g.Result.Outcome(), g.Result.Counts()
			worse(fg.Outcome)
		case k > 0:
			fg.Outcome = drift.OutcomeUnknown
			worse(drift.OutcomeUnknown)
		}
		rep.Groups = append(rep.Groups, fg)
	}
	for _, u := range fr.Unreadable {
		rep.Unreadable = append(rep.Unreadable, FleetUnreadable{Node: name(u.Node), Err: u.Err})
		worse(drift.OutcomeUnknown)
	}
	if len(fr.Groups) == 0 {
		worse(drift.OutcomeUnknown)
	}
	rep.ExitCode = rep.Outcome.ExitCode(failOnWarn)
	return rep
}

// outcomeRank orders outcomes as the exit code does: a changed verdict first.
func outcomeRank(o drift.Outcome) int {
	return slices.Index([]drift.Outcome{drift.OutcomeNone, drift.OutcomeWarn, drift.OutcomeUnknown, drift.OutcomeVerdict}, o)
}

// FleetJSON writes the fleet report as JSON (schema/diff.v1.json).
func FleetJSON(w io.Writer, r FleetReport) error { return writeJSON(w, r) }

// maxNamesShown bounds the node names a group's line lists in text.
const maxNamesShown = 8

// FleetText writes the fleet report for people: the largest group in one line,
// then each other group in one line with its differences from the largest
// below it, so that one odd node of 500 is one line and its differences.
func FleetText(w io.Writer, r FleetReport) error {
	p := newPrinter(w)
	p.line(fmt.Sprintf("fleet: %d nodes, %d fabric signatures", r.Nodes, len(r.Groups)))
	for k, g := range r.Groups {
		if k == 0 {
			what := "largest group (no majority)"
			if g.Majority {
				what = "majority"
			}
			p.line(fmt.Sprintf("%s: %d of %d nodes, signature %s", what, g.Count, r.Nodes, g.Signature))
			continue
		}
		p.line("")
		p.line(fmt.Sprintf("%s (signature %s): %s", nodeList(g), g.Signature, groupSummary(g)))
		if g.Result != nil {
			writeChanges(p, *g.Result, "  ")
		}
	}
	if len(r.Unreadable) > 0 {
		p.line("")
		p.line("could not read:")
		for _, u := range r.Unreadable {
			p.line("  " + Escape(u.Node) + ": " + Escape(u.Err))
		}
	}
	p.line("")
	p.line(fmt.Sprintf("result: %s (exit %d)", outcomeWords[r.Outcome], r.ExitCode))
	return p.done()
}

// nodeList names a group's nodes, the first few of a large group.
func nodeList(g FleetGroup) string {
	word := "nodes"
	if g.Count == 1 {
		word = "node"
	}
	names := g.Nodes
	more := ""
	if len(names) > maxNamesShown {
		names, more = names[:maxNamesShown], fmt.Sprintf(" and %d more", len(g.Nodes)-maxNamesShown)
	}
	esc := make([]string, len(names))
	for i, n := range names {
		esc[i] = Escape(n)
	}
	return fmt.Sprintf("%d %s: %s%s", g.Count, word, strings.Join(esc, ", "), more)
}

// groupSummary counts a group's changes by kind.
func groupSummary(g FleetGroup) string {
	if g.Err != "" {
		return "not compared: " + Escape(g.Err)
	}
	var parts []string
	for _, k := range drift.Kinds() {
		if n := g.Counts[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	if len(parts) == 0 {
		return outcomeWords[g.Outcome]
	}
	return outcomeWords[g.Outcome] + ": " + strings.Join(parts, ", ")
}
