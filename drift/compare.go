package drift

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pcie"
)

// Severity says what a change does.
type Severity string

// Severities.
const (
	// SeverityVerdict: the change alters a verdict (a pair's kernel verdict, path
	// class or NCCL transport, a check's status) or removes a device of interest
	// or a switch. Exit 1.
	SeverityVerdict Severity = "verdict"
	// SeverityWarn: any other drift. Exit 2 with --fail-on=warn, else 0.
	SeverityWarn Severity = "warn"
)

// End names one device in a change: its place and role, the golden's label, and
// its address on each side where it exists there.
type End struct {
	Place  string        `json:"place"`
	Role   Role          `json:"role"`
	Label  string        `json:"label,omitempty"`
	Golden *pcie.Address `json:"golden_address,omitempty"`
	Node   *pcie.Address `json:"node_address,omitempty"`
}

// Change is one difference between the golden machine and the node.
type Change struct {
	Kind     Kind     `json:"kind"`
	Severity Severity `json:"severity"`
	// What is "missing", "added", "moved" (a device of interest at another
	// place, same IDs) or "changed".
	What string `json:"what"`
	// Device is the device the change is about; nil for a node-wide fact. Peer is
	// the other end of a pair.
	Device *End `json:"device,omitempty"`
	Peer   *End `json:"peer,omitempty"`
	// Fact names what changed ("link", "kernel verdict"); Golden and Node are
	// its values on each side ("absent" where one side has no such fact).
	Fact   string `json:"fact,omitempty"`
	Golden string `json:"golden,omitempty"`
	Node   string `json:"node,omitempty"`
	// Note adds what follows from the change ("new downgrade", "with 2 gpu below it").
	Note string `json:"note,omitempty"`
}

// Gap is a fact that could not be compared, counted over the devices it
// concerns.
type Gap struct {
	Kind Kind   `json:"kind"`
	Fact string `json:"fact"`
	// Side is where it was not known: "golden", "node" or "both".
	Side string `json:"side"`
	Why  string `json:"why"`
	// Count is how many devices (or pairs) it concerns, Example the first of them.
	Count   int  `json:"count"`
	Example *End `json:"example,omitempty"`
	// Blocking is set when the golden knew the fact and the node did not: the node
	// could not be shown to match, and the comparison's verdict is unknown.
	Blocking bool `json:"blocking"`
}

// Outcome is the verdict of a comparison.
type Outcome string

// Outcomes, from best to worst for the exit code: none 0, warn 0 or 2 with
// --fail-on=warn, unknown 3, verdict 1.
const (
	OutcomeNone    Outcome = "none"
	OutcomeWarn    Outcome = "warn"
	OutcomeUnknown Outcome = "unknown"
	OutcomeVerdict Outcome = "verdict"
)

// Result is what Compare found.
type Result struct {
	Changes []Change `json:"changes"`
	Gaps    []Gap    `json:"not_compared"`
	// Omitted counts the changes left out past maxChanges.
	Omitted int `json:"omitted"`
}

// maxChanges bounds the changes a Result holds: two machines of a thousand
// devices of interest differ in at most a million pairs.
const maxChanges = 10000

// Outcome returns the comparison's verdict: a verdict change wins, then a
// blocking gap (what the golden records could not be read on the node), then
// any other change.
func (r *Result) Outcome() Outcome {
	o := OutcomeNone
	for _, c := range r.Changes {
		if c.Severity == SeverityVerdict {
			return OutcomeVerdict
		}
		o = OutcomeWarn
	}
	if slices.ContainsFunc(r.Gaps, func(g Gap) bool { return g.Blocking }) {
		return OutcomeUnknown
	}
	return o
}

// ExitCode maps the outcome to p2pcheck's exit codes (check.ExitCode's rule):
// 0 no drift, 1 a verdict changed, 2 other drift with failOnWarn, 3 could not
// compare.
func (o Outcome) ExitCode(failOnWarn bool) int {
	switch o {
	case OutcomeVerdict:
		return check.ExitFail
	case OutcomeUnknown:
		return check.ExitNoEval
	case OutcomeWarn:
		if failOnWarn {
			return check.ExitWarn
		}
	}
	return check.ExitPass
}

// Counts returns the number of changes of each kind.
func (r *Result) Counts() map[Kind]int {
	m := map[Kind]int{}
	for _, c := range r.Changes {
		m[c.Kind]++
	}
	return m
}

// comparison is the state of one Compare.
type comparison struct {
	g, n *Summary
	res  Result
	gaps map[gapKey]int // index in res.Gaps
}

type gapKey struct {
	kind       Kind
	fact, side string
	why        string
}

// Compare lists what differs between golden and node, devices matched by place.
func Compare(golden, node *Summary) Result {
	c := &comparison{g: golden, n: node, gaps: map[gapKey]int{}}
	c.devices()
	c.facts(nil, golden.Facts, node.Facts)
	c.pairs()
	slices.SortStableFunc(c.res.Changes, func(a, b Change) int {
		return cmp.Or(cmp.Compare(kindOrder(a.Kind), kindOrder(b.Kind)), cmp.Compare(a.Device.place(), b.Device.place()),
			cmp.Compare(a.Peer.place(), b.Peer.place()))
	})
	if len(c.res.Changes) > maxChanges {
		c.res.Omitted = len(c.res.Changes) - maxChanges
		c.res.Changes = c.res.Changes[:maxChanges:maxChanges]
	}
	if c.res.Changes == nil {
		c.res.Changes = []Change{}
	}
	if c.res.Gaps == nil {
		c.res.Gaps = []Gap{}
	}
	return c.res
}

func (e *End) place() string {
	if e == nil {
		return ""
	}
	return e.Place
}

func kindOrder(k Kind) int { return slices.Index(Kinds(), k) }

// end names device i of s (golden when fromGolden), with its counterpart's
// address on the other side when it has one.
func (c *comparison) end(d *Device, fromGolden bool) *End {
	e := &End{Place: d.Place, Role: d.Role}
	a := d.Address
	other := c.g
	if fromGolden {
		e.Golden, e.Label, other = &a, d.Label, c.n
	} else {
		e.Node = &a
	}
	if o := other.Device(d.Place); o != nil {
		oa := o.Address
		if fromGolden {
			e.Node = &oa
		} else {
			e.Golden, e.Label = &oa, o.Label
		}
	}
	return e
}

func (c *comparison) add(ch Change) { c.res.Changes = append(c.res.Changes, ch) }

// gap counts one fact that could not be compared.
func (c *comparison) gap(k Kind, fact, side, why string, e *End) {
	key := gapKey{k, fact, side, why}
	if i, ok := c.gaps[key]; ok {
		c.res.Gaps[i].Count++
		return
	}
	c.gaps[key] = len(c.res.Gaps)
	c.res.Gaps = append(c.res.Gaps, Gap{Kind: k, Fact: fact, Side: side, Why: why, Count: 1, Example: e, Blocking: side == "node"})
}

// devices reports the devices missing and added, and compares the facts of the
// devices both sides have.
func (c *comparison) devices() {
	var missing, added []int
	for i := range c.g.Devices {
		d := &c.g.Devices[i]
		if o := c.n.Device(d.Place); o != nil {
			c.facts(c.end(d, true), d.Facts, o.Facts)
		} else {
			missing = append(missing, i)
		}
	}
	for i := range c.n.Devices {
		if c.g.Device(c.n.Devices[i].Place) == nil {
			added = append(added, i)
		}
	}
	missing, added = c.moved(missing, added)
	c.absent(c.g, missing, true)
	c.absent(c.n, added, false)
}

// moved pairs a missing device of interest with an added one of the same role
// and IDs ("a NIC moved slots"), each added device once, in place order, and
// returns the rest.
func (c *comparison) moved(missing, added []int) (restMissing, restAdded []int) {
	key := func(d *Device) string {
		id, _ := d.Fact(factID)
		return string(d.Role) + "|" + id.Value
	}
	candidates := map[string][]int{} // added devices of interest by role and IDs
	for _, k := range added {
		if o := &c.n.Devices[k]; o.Of() {
			candidates[key(o)] = append(candidates[key(o)], k)
		}
	}
	used := map[int]bool{}
	for _, i := range missing {
		d := &c.g.Devices[i]
		ks := candidates[key(d)]
		if !d.Of() || len(ks) == 0 {
			restMissing = append(restMissing, i)
			continue
		}
		k := ks[0]
		candidates[key(d)] = ks[1:]
		used[k] = true
		o := &c.n.Devices[k]
		c.add(Change{Kind: Devices, Severity: SeverityVerdict, What: "moved", Device: c.end(d, true),
			Fact: "place", Golden: d.Place, Node: o.Place, Note: "now at " + o.Address.String()})
	}
	for _, k := range added {
		if !used[k] {
			restAdded = append(restAdded, k)
		}
	}
	return restMissing, restAdded
}

// absent reports the devices of s at idx that the other side lacks, each
// subtree once, at its top, with the devices of interest below it counted.
func (c *comparison) absent(s *Summary, idx []int, golden bool) {
	gone := map[int]bool{}
	for _, i := range idx {
		gone[i] = true
	}
	top := map[int]int{} // device -> the topmost absent device above it (or itself)
	below := map[int]map[Role]int{}
	for _, i := range idx { // place order: parents before children
		t := i
		if p := s.Devices[i].Parent; p >= 0 && gone[p] {
			t = top[p]
		}
		top[i] = t
		if t != i && s.Devices[i].Of() {
			if below[t] == nil {
				below[t] = map[Role]int{}
			}
			below[t][s.Devices[i].Role]++
		}
	}
	for _, i := range idx {
		if top[i] != i {
			continue
		}
		d := &s.Devices[i]
		ch := Change{Kind: Devices, Severity: SeverityWarn, What: "added", Device: c.end(d, golden), Note: belowText(below[i])}
		id, _ := d.Fact(factID)
		if golden {
			ch.What, ch.Golden = "missing", id.Value
			if d.Of() || len(below[i]) > 0 || d.Role == RoleSwitch {
				ch.Severity = SeverityVerdict
			}
		} else {
			ch.Node = id.Value
		}
		c.add(ch)
	}
}

func belowText(m map[Role]int) string {
	if len(m) == 0 {
		return ""
	}
	var parts []string
	for _, r := range []Role{RoleGPU, RoleRDMANIC, RoleNIC, RoleNVMe, RoleAccelerator, RoleP2PMem} {
		if m[r] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", m[r], r))
		}
	}
	return "with " + strings.Join(parts, ", ") + " below it"
}

// facts compares two lists of facts of one device (e nil: of the node).
func (c *comparison) facts(e *End, gf, nf []Fact) {
	for _, f := range gf {
		o, ok := findFact(nf, f.Name)
		if !ok {
			if f.Known {
				c.add(c.factChange(e, f, Fact{Kind: f.Kind, Name: f.Name, Value: "absent", Known: true}))
			}
			continue
		}
		switch {
		case f.Known && o.Known && f.Value != o.Value:
			c.add(c.factChange(e, f, o))
		case f.Known && !o.Known:
			c.gap(f.Kind, f.Name, "node", o.Value, e)
		case !f.Known && o.Known:
			c.gap(f.Kind, f.Name, "golden", f.Value, e)
		case !f.Known && !o.Known:
			c.gap(f.Kind, f.Name, "both", o.Value, e)
		}
	}
	for _, o := range nf {
		if _, ok := findFact(gf, o.Name); !ok && o.Known {
			c.add(c.factChange(e, Fact{Kind: o.Kind, Name: o.Name, Value: "absent", Known: true}, o))
		}
	}
}

func findFact(fs []Fact, name string) (Fact, bool) {
	for _, f := range fs {
		if f.Name == name {
			return f, true
		}
	}
	return Fact{}, false
}

// factChange describes one changed fact.
func (c *comparison) factChange(e *End, g, n Fact) Change {
	ch := Change{Kind: g.Kind, Severity: SeverityWarn, What: "changed", Device: e, Fact: g.Name, Golden: g.Value, Node: n.Value}
	switch g.Name {
	case factLink:
		if strings.HasSuffix(n.Value, "(downgraded)") && !strings.HasSuffix(g.Value, "(downgraded)") {
			ch.Note = "new downgrade"
		}
	case factACS:
		ch.Note = acsNote(g.Value, n.Value)
	case factGroup:
		ch.Golden, ch.Node = c.groupText(c.g, g.Value), c.groupText(c.n, n.Value)
	}
	if g.Kind == Checks {
		ch.Severity = SeverityVerdict
	}
	return ch
}

// acsNote says how ACS redirect (RR, CR, EC: what the kernel's P2PDMA tests)
// changed between two ACSCtl texts.
func acsNote(g, n string) string {
	rg, rn := redirectFromText(g), redirectFromText(n)
	switch {
	case rg == rn:
		return ""
	case rn == "":
		return "ACS redirect now off"
	case rg == "":
		return "ACS redirect now on (" + rn + ")"
	}
	return "ACS redirect " + rg + " -> " + rn
}

// redirectFromText returns the redirect bits set in an ACSCtl text, as
// RedirectWords names them.
func redirectFromText(s string) string {
	var bits uint16
	for _, w := range []struct {
		word string
		bit  uint16
	}{{"ReqRedir+", pcie.ACSRequestRedirect}, {"CmpltRedir+", pcie.ACSCompletionRedirect}, {"EgressCtrl+", pcie.ACSEgressControl}} {
		if strings.Contains(s, w.word) {
			bits |= w.bit
		}
	}
	return RedirectWords(bits)
}

// RedirectWords names the ACS redirect bits set in an ACS Control value, the
// bits pci_bridge_has_acs_redir() in drivers/pci/p2pdma.c tests, by their
// short names in the PCI Express specification: "RR CR", "RR CR EC"; "" when
// none is set.
func RedirectWords(ctrl uint16) string {
	var w []string
	for _, b := range []struct {
		bit  uint16
		name string
	}{{pcie.ACSRequestRedirect, "RR"}, {pcie.ACSCompletionRedirect, "CR"}, {pcie.ACSEgressControl, "EC"}} {
		if ctrl&b.bit != 0 {
			w = append(w, b.name)
		}
	}
	return strings.Join(w, " ")
}

// groupText describes an IOMMU group (its groupLabels value) by its size and
// the devices of interest in it: "4 functions with GPU0, NIC0".
func (c *comparison) groupText(s *Summary, label string) string {
	if label == "none" || label == "" {
		return "none"
	}
	var members []string
	for _, i := range s.Interest {
		d := &s.Devices[i]
		if f, ok := d.Fact(factGroup); ok && f.Value == label {
			members = append(members, c.name(d, s == c.g))
		}
	}
	size := label
	if i := strings.LastIndex(label, " ("); i >= 0 {
		size = strings.TrimSuffix(label[i+2:], ")")
	}
	if size == "1 functions" {
		size = "1 function"
	}
	return size + " with " + strings.Join(members, ", ")
}

// name is how a device is named in text: the golden's label for a device of
// interest, else its role and place.
func (c *comparison) name(d *Device, golden bool) string {
	if golden && d.Label != "" {
		return d.Label
	}
	if !golden {
		if g := c.g.Device(d.Place); g != nil && g.Label != "" {
			return g.Label
		}
	}
	return string(d.Role) + " " + d.Place
}

// pairs compares the verdicts of the pairs both sides have.
func (c *comparison) pairs() {
	g, n := c.g, c.n
	if g.pairs == nil || n.pairs == nil {
		why, side := g.PairsNote, "golden"
		if n.pairs == nil {
			why, side = n.PairsNote, "node"
		}
		if len(g.Interest) > 1 || len(n.Interest) > 1 {
			c.gap(Pairs, "pairs", side, why, nil)
		}
		return
	}
	switch {
	case g.NCCL && !n.NCCL:
		c.gap(Pairs, "NCCL transport", "node", n.PairsNote, nil)
	case !g.NCCL && n.NCCL:
		c.gap(Pairs, "NCCL transport", "golden", g.PairsNote, nil)
	case !g.NCCL:
		c.gap(Pairs, "NCCL transport", "both", g.PairsNote, nil)
	}
	at := make([]int, len(g.Interest)) // golden interest index -> node interest index
	for i, di := range g.Interest {
		at[i] = -1
		if o := n.Device(g.Devices[di].Place); o != nil {
			at[i] = o.interest
		}
	}
	for i := range g.Interest {
		for j := range g.Interest {
			if i == j || at[i] < 0 || at[j] < 0 {
				continue
			}
			gp, _ := g.pair(i, j)
			np, _ := n.pair(at[i], at[j])
			c.pair(&g.Devices[g.Interest[i]], &g.Devices[g.Interest[j]], gp, np)
		}
	}
}

// pair compares one ordered pair's verdicts. Between two GPUs the path class
// and NCCL's transport depend on NVLink, which only NVML knows: where one side
// has NVML's facts and the other not, they are not compared.
func (c *comparison) pair(a, b *Device, gp, np pairFacts) {
	ea, eb := c.end(a, true), c.end(b, true)
	change := func(fact, gv, nv string) {
		c.add(Change{Kind: Pairs, Severity: SeverityVerdict, What: "changed", Device: ea, Peer: eb, Fact: fact, Golden: gv, Node: nv})
	}
	c.kernel(ea, gp, np, change)
	if a.Role == RoleGPU && b.Role == RoleGPU && c.g.NVML != c.n.NVML {
		side := "node"
		if !c.g.NVML {
			side = "golden"
		}
		c.gap(Pairs, "path class and NCCL transport between GPUs", side, "no NVML facts: NVLinks unknown", ea)
		return
	}
	if gp.nvsmi != np.nvsmi || gp.nvlinks != np.nvlinks || gp.nccl != np.nccl {
		change("path class", gp.classText(), np.classText())
	}
	if c.g.NCCL && c.n.NCCL {
		if gt, nt := c.g.transportText(gp), c.n.transportText(np); gt != nt {
			change("NCCL transport", gt, nt)
		}
	}
}

// kernel compares one pair's kernel verdicts; an unknown one is not compared.
func (c *comparison) kernel(e *End, gp, np pairFacts, change func(fact, gv, nv string)) {
	switch {
	case gp.mapType != p2pdma.Unknown && np.mapType == p2pdma.Unknown:
		c.gap(Pairs, "kernel verdict", "node", "a fact the kernel's verdict needs was not read", e)
	case gp.mapType == p2pdma.Unknown && np.mapType != p2pdma.Unknown:
		c.gap(Pairs, "kernel verdict", "golden", "a fact the kernel's verdict needs was not read", e)
	case gp.mapType != np.mapType || gp.distance != np.distance:
		change("kernel verdict", gp.kernelText(), np.kernelText())
	}
}
