package provision

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pcie"
)

// SchemaVersion is the version of the `p2pcheck fix --format json` document
// (schema/fix.v1.json).
const SchemaVersion = "1"

// Results of a run, the Report's Result field.
const (
	ResultNothingToDo = "nothing-to-do" // no action is needed
	ResultPlanned     = "planned"       // dry run: the actions would change verdicts
	ResultFixed       = "fixed"         // every action done, read back and re-evaluated as predicted
	ResultNotFixed    = "not-fixed"     // an action failed or a verdict differs from the prediction
	ResultUnknown     = "unknown"       // some pair could not be evaluated
)

// Exit codes of `p2pcheck fix`, one per result.
const (
	ExitOK       = 0 // nothing to do, planned, or fixed
	ExitNotFixed = 1
	ExitUnknown  = 3
)

// Advice is a readiness check whose fix `p2pcheck fix` names but never applies
// (IOMMU passthrough, gdrdrv, nvidia-peermem, the memlock limit).
type Advice struct {
	ID          string   `json:"id"`
	Status      string   `json:"status"`
	Summary     string   `json:"summary"`
	Remediation []string `json:"remediation,omitempty"`
}

// Verdict is the part of a p2pdma.Verdict the fix report shows.
type Verdict struct {
	MapType     string         `json:"map_type"`
	Distance    int            `json:"distance"`
	ACSRedirect []pcie.Address `json:"acs_redirect"`
	Reason      string         `json:"reason"`
}

func verdictOf(v p2pdma.Verdict) Verdict {
	r := v.ACSRedirect
	if r == nil {
		r = []pcie.Address{}
	}
	return Verdict{MapType: v.MapType.String(), Distance: v.Distance, ACSRedirect: r, Reason: v.Reason}
}

// ReportPair is one pair of interest in the report.
type ReportPair struct {
	Provider  pcie.Address `json:"provider"`
	Client    pcie.Address `json:"client"`
	Before    Verdict      `json:"before"`
	Predicted Verdict      `json:"predicted"`
	// After is the verdict read again after --apply; nil in a dry run.
	After *Verdict `json:"after,omitempty"`
	// AsPredicted is false when After differs from Predicted.
	AsPredicted *bool `json:"as_predicted,omitempty"`
}

// ReportAction is one runtime action in the report.
type ReportAction struct {
	Address     pcie.Address `json:"address"`
	Spec        string       `json:"spec"`
	Register    string       `json:"register"`
	Control     string       `json:"acs_control"`
	Planned     string       `json:"planned"`
	Mask        string       `json:"mask"`
	Why         string       `json:"why"`
	Setpci      string       `json:"setpci"`
	Pairs       int          `json:"pairs"`
	IOMMUGroups []int        `json:"iommu_groups"`
	// Written, ReadBack and Error are set after --apply.
	Written  *bool  `json:"written,omitempty"`
	ReadBack string `json:"read_back,omitempty"`
	Error    string `json:"error,omitempty"`
}

// Persistent is the boot-time part of the plan.
type Persistent struct {
	// Form is how the plan is kept across a reboot on the kernel it is for: a
	// parameter ("disable_acs_redir", "config_acs"), or why none ("runtime-only",
	// "broken-kernel", "unknown-kernel"); "" when there is nothing to keep.
	Form string `json:"form"`
	// Kernel is the release the form was chosen for.
	Kernel string `json:"kernel"`
	Reason string `json:"reason"`
	// KernelParam is the parameter, "" unless Form names one.
	KernelParam string `json:"kernel_param"`
	// Boot is ACS Control of each function the parameter names after a boot with it.
	Boot []BootValue `json:"boot"`
	// CmdlineLength is the length of the kernel command line with the parameter
	// added; Fits reports whether it stays within COMMAND_LINE_SIZE.
	CmdlineLength int      `json:"cmdline_length,omitempty"`
	Fits          bool     `json:"fits"`
	DropInPath    string   `json:"drop_in_path"`
	DropIn        string   `json:"drop_in"`
	Grubby        []string `json:"grubby"`
	// Written is set when --persist wrote the drop-in.
	Written bool `json:"written"`
}

// BootValue is one function's ACS Control after a boot with the parameter.
type BootValue struct {
	Address pcie.Address `json:"address"`
	Control string       `json:"acs_control"`
}

// ReportShape is one NVIDIA platform shape in the report.
type ReportShape struct {
	Kind     string         `json:"kind"`
	NICs     []pcie.Address `json:"nics"`
	GPUs     []pcie.Address `json:"gpus"`
	DMA      *pcie.Address  `json:"dma,omitempty"`
	RootPort *pcie.Address  `json:"root_port,omitempty"`
	NUMANode *int           `json:"numa_node,omitempty"`
	Boards   []ReportBoard  `json:"boards"`
}

// ReportBoard is one NIC board: its VPD serial (a pseudonym in a redacted
// snapshot, "" unknown) and its NICs, each a list of physical functions.
type ReportBoard struct {
	Serial string           `json:"serial"`
	NICs   [][]pcie.Address `json:"nics"`
}

// Report is the outcome of one `p2pcheck fix` run: the document --format json
// prints and the text output shows.
type Report struct {
	SchemaVersion string `json:"schema_version"`
	Mode          string `json:"mode"` // "dry-run" or "apply"
	Result        string `json:"result"`
	ExitCode      int    `json:"exit_code"`
	// Use is what the plan is for, "bare-metal" or "virt-host", and UseReason how
	// that was decided (a flag, or the NICs' ATS capability).
	Use         string         `json:"use"`
	UseReason   string         `json:"use_reason"`
	Shapes      []ReportShape  `json:"shapes"`
	Pairs       []ReportPair   `json:"pairs"`
	Actions     []ReportAction `json:"actions"`
	Persistent  Persistent     `json:"persistent"`
	IOMMUGroups []int          `json:"iommu_groups"`
	// GroupsAfter are the IOMMU groups a reboot with the parameter gives, predicted
	// with the kernel's rules, that hold two or more devices of the pairs; Groups
	// Differ says where the groups as read differ from the prediction (a quirk).
	GroupsAfter  [][]pcie.Address `json:"iommu_groups_after"`
	GroupsDiffer []string         `json:"iommu_groups_differ"`
	Notes        []string         `json:"notes"`
	Advice       []Advice         `json:"advice"`
	Unknown      []string         `json:"unknown"`
	Warnings     []string         `json:"warnings"`
}

// NewReport builds the report of a dry run (done nil) or of --apply (done from
// Apply, after the verdicts re-evaluated on the machine read again and mismatched
// from Plan.Compare).
func (p Plan) NewReport(apply bool, done []Done, after []p2pdma.Verdict, mismatched []int) Report {
	r := Report{SchemaVersion: SchemaVersion, Mode: "dry-run", Use: string(p.Mode), Shapes: reportShapes(p.Shapes),
		Pairs: []ReportPair{}, Actions: []ReportAction{}, IOMMUGroups: orEmpty(p.IOMMUGroups()),
		GroupsAfter: p.groupsAfter(), GroupsDiffer: []string{}, Notes: orEmpty(p.Notes),
		Advice: []Advice{}, Unknown: orEmpty(slices.Clone(p.Unknown)), Warnings: []string{}}
	if apply {
		r.Mode = "apply"
	}
	for _, m := range p.GroupsDiffer {
		r.GroupsDiffer = append(r.GroupsDiffer, m.String())
	}
	for i, pr := range p.Pairs {
		rp := ReportPair{Provider: pr.Provider.Address, Client: pr.Client.Address,
			Before: verdictOf(pr.Before), Predicted: verdictOf(pr.Predicted)}
		if i < len(after) {
			v := verdictOf(after[i])
			ok := !slices.Contains(mismatched, i)
			rp.After, rp.AsPredicted = &v, &ok
		}
		r.Pairs = append(r.Pairs, rp)
	}
	failed := false
	for i, a := range p.Actions {
		ra := ReportAction{Address: a.Device.Address, Spec: DeviceSpec(a.Device),
			Register: fmt.Sprintf("%#03x", a.CapOffset+6), Control: hex16(a.Control), Planned: hex16(a.Planned),
			Mask: hex16(a.Mask), Why: a.Why, Setpci: a.Setpci, Pairs: a.Pairs, IOMMUGroups: orEmpty(a.IOMMUGroups)}
		if i < len(done) {
			d := done[i]
			w := d.Written
			ra.Written, ra.ReadBack = &w, hex16(d.After)
			if d.Err != nil {
				ra.Error, failed = d.Err.Error(), true
			}
		}
		r.Actions = append(r.Actions, ra)
	}
	r.Persistent = p.persistent()
	switch {
	case len(p.Unknown) > 0:
		r.Result, r.ExitCode = ResultUnknown, ExitUnknown
	case len(p.Actions) == 0:
		r.Result = ResultNothingToDo
	case !apply:
		r.Result = ResultPlanned
	case failed || len(mismatched) > 0:
		r.Result, r.ExitCode = ResultNotFixed, ExitNotFixed
	default:
		r.Result = ResultFixed
	}
	if apply && len(done) > 0 {
		r.Warnings = append(r.Warnings, p.cacheWarning())
	}
	return r
}

// persistent is the report's boot-time part.
func (p Plan) persistent() Persistent {
	b := p.Boot
	out := Persistent{Form: string(b.Form), Reason: b.Reason, KernelParam: b.Param, Boot: []BootValue{},
		DropIn: p.GrubDropIn(), Grubby: orEmpty(p.GrubbyArgs()), Fits: true}
	if b.Form != FormNone {
		out.Kernel = b.Kernel.String()
	}
	for _, s := range b.Boot {
		out.Boot = append(out.Boot, BootValue{Address: s.Device.Address, Control: hex16(s.Planned)})
	}
	if out.DropIn != "" {
		out.DropInPath = "/" + DropInPath
	}
	return out
}

// CheckLength records how long the kernel command line cmdline (the running one,
// /proc/cmdline) gets with the parameter added, and whether it still fits.
func (r *Report) CheckLength(cmdline string, b BootParam) {
	if !b.Usable() {
		return
	}
	r.Persistent.CmdlineLength, r.Persistent.Fits = b.Fits(cmdline)
	if !r.Persistent.Fits {
		r.Warnings = append(r.Warnings, fmt.Sprintf("the kernel command line would be %d characters with the parameter, "+
			"past the %d the kernel keeps (COMMAND_LINE_SIZE %d on x86 and arm64): it would be cut off, so "+
			"--persist does not write it; fewer pairs (--pairs) make it shorter",
			r.Persistent.CmdlineLength, CommandLineSize-1, CommandLineSize))
	}
}

// groupsAfter lists the predicted groups after a reboot that hold two or more
// functions of the plan's pairs, each with all its members.
func (p Plan) groupsAfter() [][]pcie.Address {
	out := [][]pcie.Address{}
	if p.GroupsAfter == nil {
		return out
	}
	ends := map[pcie.Address]bool{}
	for _, pr := range p.Pairs {
		ends[pr.Provider.Address], ends[pr.Client.Address] = true, true
	}
	for g := range p.GroupsAfter.Len() {
		m := p.GroupsAfter.Members(g)
		n := 0
		for _, a := range m {
			if ends[a] {
				n++
			}
		}
		if n >= 2 {
			out = append(out, m)
		}
	}
	return out
}

func reportShapes(shapes []Shape) []ReportShape {
	out := []ReportShape{}
	for _, s := range shapes {
		rs := ReportShape{Kind: string(s.Kind), NICs: addrsOf(s.NICs), GPUs: addrsOf(s.GPUs), Boards: []ReportBoard{}}
		if s.DMA != nil {
			a := s.DMA.Address
			rs.DMA = &a
		}
		if s.RootPort != nil {
			a := s.RootPort.Address
			rs.RootPort = &a
		}
		if s.Kind == ShapeNUMA {
			n := s.NUMANode
			rs.NUMANode = &n
		}
		for _, b := range s.Boards {
			rb := ReportBoard{Serial: b.Serial, NICs: [][]pcie.Address{}}
			for _, n := range b.NICs {
				rb.NICs = append(rb.NICs, addrsOf(n))
			}
			rs.Boards = append(rs.Boards, rb)
		}
		out = append(out, rs)
	}
	return out
}

func addrsOf(ds []*pcie.Device) []pcie.Address {
	out := make([]pcie.Address, len(ds))
	for i, d := range ds {
		out[i] = d.Address
	}
	return out
}

// orEmpty returns s, or an empty slice for nil, so that JSON shows [].
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// cacheWarning says which providers need their driver rebound before the kernel
// uses the new verdicts.
func (p Plan) cacheWarning() string {
	var provs []string
	for _, pr := range p.Pairs {
		if SameVerdict(pr.Before, pr.Predicted) {
			continue
		}
		s := pr.Provider.Address.String()
		if pr.Provider.Driver != "" {
			s += " (" + pr.Provider.Driver + ")"
		}
		if !slices.Contains(provs, s) {
			provs = append(provs, s)
		}
	}
	w := "the kernel caches a verdict per provider and client once a driver has asked for it " +
		"(pci_p2pdma_map_type() stores it in the provider's map_types, drivers/pci/p2pdma.c): " +
		"pairs already evaluated keep their old verdict until the provider's driver is unbound and bound again"
	if len(provs) > 0 {
		w += "; providers whose pairs changed: " + strings.Join(provs, ", ")
	}
	return w
}

func hex16(v uint16) string { return fmt.Sprintf("0x%04x", v) }

// WriteJSON writes the report as one indented JSON document.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report for people, in causal order: what the plan is for,
// the pairs before and after, the runtime actions, the boot parameter and the groups
// it gives, the advice, then notes and warnings.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	if r.Mode == "apply" {
		b.WriteString("p2pcheck fix --apply\n")
	} else {
		b.WriteString("p2pcheck fix: dry run, nothing is changed (--apply performs the runtime actions)\n")
	}
	fmt.Fprintf(&b, "plan for: %s (%s)\n", r.Use, r.UseReason)
	r.writeShapes(&b)
	r.writePairs(&b)
	r.writeActions(&b)
	r.writePersistent(&b)
	r.writeGroups(&b)
	if len(r.Advice) > 0 {
		b.WriteString("\nAdvice, never applied by p2pcheck:\n")
		for _, a := range r.Advice {
			fmt.Fprintf(&b, "  %s (%s): %s\n", a.ID, a.Status, a.Summary)
			for _, f := range a.Remediation {
				fmt.Fprintf(&b, "      %s\n", f)
			}
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\nnote: %s\n", n)
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "\nwarning: %s\n", w)
	}
	fmt.Fprintf(&b, "\nresult: %s\n", r.Result)
	_, err := io.WriteString(w, b.String())
	return err
}

func (r Report) writeShapes(b *strings.Builder) {
	for _, s := range r.Shapes {
		fmt.Fprintf(b, "NVIDIA shape %s: NIC %s, GPU %s", s.Kind, joinAddrs(s.NICs), joinAddrs(s.GPUs))
		if s.DMA != nil {
			fmt.Fprintf(b, ", Data Direct function %s", s.DMA)
		}
		if s.RootPort != nil {
			fmt.Fprintf(b, ", root port %s", s.RootPort)
		}
		if s.NUMANode != nil {
			fmt.Fprintf(b, ", NUMA node %d", *s.NUMANode)
		}
		b.WriteString("\n")
		for _, bd := range s.Boards {
			if len(bd.NICs) > 1 || len(bd.NICs) == 1 && len(bd.NICs[0]) > 1 {
				serial := bd.Serial
				if serial == "" {
					serial = "serial unknown"
				}
				fmt.Fprintf(b, "  board %s: %d NIC(s):", serial, len(bd.NICs))
				for _, n := range bd.NICs {
					fmt.Fprintf(b, " [%s]", joinAddrs(n))
				}
				b.WriteString("\n")
			}
		}
	}
}

func (r Report) writePairs(b *strings.Builder) {
	col := "PREDICTED"
	if r.Mode == "apply" {
		col = "AFTER"
	}
	var same []string
	var rows strings.Builder
	for _, p := range r.Pairs {
		next := p.Predicted
		if p.After != nil {
			next = *p.After
		}
		off := p.AsPredicted != nil && !*p.AsPredicted
		if !off && next.MapType == p.Before.MapType && next.Distance == p.Before.Distance {
			if c := clause(next.Reason); next.MapType != "bus-addr" && !slices.Contains(same, c) {
				same = append(same, c)
			}
			continue
		}
		mark := ""
		if off {
			mark = fmt.Sprintf("   NOT AS PREDICTED (%s %d)", p.Predicted.MapType, p.Predicted.Distance)
		}
		fmt.Fprintf(&rows, "  %-13s %-13s %-20s -> %s%s\n", p.Provider, p.Client,
			fmt.Sprintf("%s %d", p.Before.MapType, p.Before.Distance), fmt.Sprintf("%s %d", next.MapType, next.Distance), mark)
	}
	changed := strings.Count(rows.String(), "\n")
	fmt.Fprintf(b, "\nPairs of interest: %d, %d changed by the runtime actions\n", len(r.Pairs), changed)
	if changed > 0 {
		fmt.Fprintf(b, "  %-13s %-13s %-20s    %s\n", "PROVIDER", "CLIENT", "NOW", col)
		b.WriteString(rows.String())
	}
	if len(same) > 0 {
		fmt.Fprintf(b, "  unchanged and not bus-addr: %s\n", strings.Join(same, "; "))
	}
	if len(r.Unknown) > 0 {
		b.WriteString("\nCould not evaluate (run as root: ACS Control is past the first 64 bytes of config space):\n")
		for _, u := range r.Unknown {
			fmt.Fprintf(b, "  %s\n", u)
		}
	}
}

func (r Report) writeActions(b *strings.Builder) {
	b.WriteString("\nRuntime actions, in order: ACS Control by read-modify-write, the bits outside each mask kept\n")
	if len(r.Actions) == 0 {
		b.WriteString("  none: ACS Control already holds the planned values\n")
	}
	for i, a := range r.Actions {
		fmt.Fprintf(b, "  %d. %s  ACS Control (%s) %s -> %s (mask %s)", i+1, a.Address, a.Register, a.Control, a.Planned, a.Mask)
		switch {
		case a.Error != "":
			fmt.Fprintf(b, "  FAILED: %s", a.Error)
		case a.Written != nil && *a.Written:
			fmt.Fprintf(b, "  done, read back %s", a.ReadBack)
		case a.Written != nil:
			fmt.Fprintf(b, "  already %s, nothing written", a.ReadBack)
		}
		fmt.Fprintf(b, "\n     %s\n     for: %s\n     on the path of %d pair(s); IOMMU groups at and below it: %s\n",
			a.Setpci, a.Why, a.Pairs, groupList(a.IOMMUGroups))
	}
	if len(r.Actions) > 0 {
		b.WriteString("  A runtime change is lost at reboot, and undone whenever the kernel restores a port's state: " +
			"pci_restore_state() calls pci_enable_acs() (drivers/pci/pci.c) on resume from suspend, runtime D3 of the " +
			"port, AER or DPC recovery and after a reset. The report's acs_drift check notices it; run fix --apply again.\n")
	}
}

func (r Report) writePersistent(b *strings.Builder) {
	p := r.Persistent
	switch {
	case p.Form == string(FormNone):
		return
	case p.KernelParam == "":
		fmt.Fprintf(b, "\nPersistent: no boot parameter keeps this plan (%s): %s\n", p.Form, p.Reason)
		return
	}
	b.WriteString("\nPersistent (boot parameter")
	if p.Written {
		fmt.Fprintf(b, ", written to %s; run update-grub or grub2-mkconfig", p.DropInPath)
	} else {
		b.WriteString(", printed only: --persist writes it")
	}
	fmt.Fprintf(b, "):\n  %s\n  why this form: %s\n", p.KernelParam, p.Reason)
	if p.CmdlineLength > 0 {
		fmt.Fprintf(b, "  command line with it: %d characters (the kernel keeps %d)\n", p.CmdlineLength, CommandLineSize-1)
	}
	fmt.Fprintf(b, "  %s:\n", p.DropInPath)
	for _, l := range strings.Split(strings.TrimSuffix(p.DropIn, "\n"), "\n") {
		fmt.Fprintf(b, "    %s\n", l)
	}
	fmt.Fprintf(b, "  with grubby: %s\n", strings.Join(p.Grubby, " "))
	b.WriteString("  grubby --update-kernel=ALL adds it for every installed kernel: one older or newer than this " +
		"one may parse it differently (see docs/fix.md)\n")
}

func (r Report) writeGroups(b *strings.Builder) {
	if len(r.IOMMUGroups) > 0 && r.Use != string(ModeVirtHost) {
		fmt.Fprintf(b, "\nIOMMU groups affected: %s. ACS is an isolation feature: with redirect off, functions "+
			"below these bridges reach each other without the IOMMU. Groups are formed at boot, and VFIO keeps "+
			"trusting the groups formed then until the next boot: after the runtime change, functions of separate "+
			"groups below these bridges are no longer isolated from each other although VFIO may still give them "+
			"to different VMs or users.\n", groupList(r.IOMMUGroups))
	}
	if len(r.GroupsAfter) > 0 {
		b.WriteString("\nIOMMU groups after a reboot with the parameter (predicted, drivers/iommu/iommu.c " +
			"pci_device_group()), those holding two or more devices of the pairs:\n")
		for _, g := range r.GroupsAfter {
			fmt.Fprintf(b, "  %s\n", joinAddrs(g))
		}
	}
	for _, d := range r.GroupsDiffer {
		fmt.Fprintf(b, "  the groups as read differ from the prediction (a device quirk?), so those after the reboot may too: %s\n", d)
	}
}

func joinAddrs(as []pcie.Address) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}

func groupList(g []int) string {
	if len(g) == 0 {
		return "none known"
	}
	return joinInts(g)
}

// clause is the first clause of a reason, for a table cell: up to a semicolon or a
// colon that ends a clause (not one inside an address), and a list of ACS bridges
// without what follows it.
func clause(reason string) string {
	for i, c := range reason {
		if c == ';' || c == ':' && (i+1 == len(reason) || reason[i+1] == ' ') {
			reason = reason[:i]
			break
		}
	}
	if i := strings.Index(reason, ", between the client"); i > 0 {
		reason = reason[:i]
	}
	return reason
}
