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
	KernelParam string   `json:"kernel_param"`
	DropInPath  string   `json:"drop_in_path"`
	DropIn      string   `json:"drop_in"`
	Grubby      []string `json:"grubby"`
	// Written is set when --persist wrote the drop-in.
	Written bool `json:"written"`
}

// Report is the outcome of one `p2pcheck fix` run: the document --format json
// prints and the text output shows.
type Report struct {
	SchemaVersion string         `json:"schema_version"`
	Mode          string         `json:"mode"` // "dry-run" or "apply"
	Result        string         `json:"result"`
	ExitCode      int            `json:"exit_code"`
	Pairs         []ReportPair   `json:"pairs"`
	Actions       []ReportAction `json:"actions"`
	Persistent    Persistent     `json:"persistent"`
	IOMMUGroups   []int          `json:"iommu_groups"`
	Advice        []Advice       `json:"advice"`
	Unknown       []string       `json:"unknown"`
	Warnings      []string       `json:"warnings"`
}

// NewReport builds the report of a dry run (done nil) or of --apply (done from
// Apply, after the verdicts re-evaluated on the machine read again and mismatched
// from Plan.Compare).
func (p Plan) NewReport(apply bool, done []Done, after []p2pdma.Verdict, mismatched []int) Report {
	r := Report{SchemaVersion: SchemaVersion, Mode: "dry-run", Pairs: []ReportPair{}, Actions: []ReportAction{},
		IOMMUGroups: p.IOMMUGroups(), Advice: []Advice{}, Unknown: slices.Clone(p.Unknown), Warnings: []string{}}
	if apply {
		r.Mode = "apply"
	}
	if r.IOMMUGroups == nil {
		r.IOMMUGroups = []int{}
	}
	if r.Unknown == nil {
		r.Unknown = []string{}
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
			Setpci: a.Setpci, Pairs: a.Pairs, IOMMUGroups: a.IOMMUGroups}
		if ra.IOMMUGroups == nil {
			ra.IOMMUGroups = []int{}
		}
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
	r.Persistent = Persistent{KernelParam: p.KernelParam, DropIn: p.GrubDropIn(), Grubby: p.GrubbyArgs()}
	if r.Persistent.DropIn != "" {
		r.Persistent.DropInPath = "/" + DropInPath
	}
	if r.Persistent.Grubby == nil {
		r.Persistent.Grubby = []string{}
	}
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

// WriteText writes the report for people, in causal order: the pairs before and
// after, the runtime actions, the boot parameter, the advice, then warnings.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	if r.Mode == "apply" {
		b.WriteString("p2pcheck fix --apply\n")
	} else {
		b.WriteString("p2pcheck fix: dry run, nothing is changed (--apply performs the runtime actions)\n")
	}
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
	fmt.Fprintf(&b, "\nPairs of interest: %d, %d changed by the runtime actions\n", len(r.Pairs), changed)
	if changed > 0 {
		fmt.Fprintf(&b, "  %-13s %-13s %-20s    %s\n", "PROVIDER", "CLIENT", "NOW", col)
		b.WriteString(rows.String())
	}
	if len(same) > 0 {
		fmt.Fprintf(&b, "  unchanged and not bus-addr, not an ACS matter: %s\n", strings.Join(same, "; "))
	}
	if len(r.Unknown) > 0 {
		b.WriteString("\nCould not evaluate (run as root: ACS Control is past the first 64 bytes of config space):\n")
		for _, u := range r.Unknown {
			fmt.Fprintf(&b, "  %s\n", u)
		}
	}
	b.WriteString("\nRuntime actions, in order: clear RR, CR and EC (0x002c) in ACS Control, other bits kept\n")
	if len(r.Actions) == 0 {
		b.WriteString("  none: no ACS redirect stands between the pairs of interest\n")
	}
	for i, a := range r.Actions {
		fmt.Fprintf(&b, "  %d. %s  ACS Control (%s) %s -> %s", i+1, a.Address, a.Register, a.Control, a.Planned)
		switch {
		case a.Error != "":
			fmt.Fprintf(&b, "  FAILED: %s", a.Error)
		case a.Written != nil && *a.Written:
			fmt.Fprintf(&b, "  done, read back %s", a.ReadBack)
		case a.Written != nil:
			fmt.Fprintf(&b, "  already %s, nothing written", a.ReadBack)
		}
		fmt.Fprintf(&b, "\n     %s\n     on the path of %d pair(s); isolation given up: IOMMU groups %s\n",
			a.Setpci, a.Pairs, groupList(a.IOMMUGroups))
	}
	if r.Persistent.KernelParam != "" {
		b.WriteString("\nPersistent (boot parameter")
		if r.Persistent.Written {
			fmt.Fprintf(&b, ", written to %s; run update-grub or grub2-mkconfig", r.Persistent.DropInPath)
		} else {
			b.WriteString(", printed only: --persist writes it")
		}
		b.WriteString("):\n")
		fmt.Fprintf(&b, "  %s\n  %s:\n", r.Persistent.KernelParam, r.Persistent.DropInPath)
		for _, l := range strings.Split(strings.TrimSuffix(r.Persistent.DropIn, "\n"), "\n") {
			fmt.Fprintf(&b, "    %s\n", l)
		}
		fmt.Fprintf(&b, "  with grubby: %s\n", strings.Join(r.Persistent.Grubby, " "))
	}
	if len(r.IOMMUGroups) > 0 {
		fmt.Fprintf(&b, "\nIOMMU groups affected: %s. ACS is an isolation feature: with redirect off, functions "+
			"below these bridges can reach each other without the IOMMU, and at the next boot with the parameter "+
			"the kernel may merge their groups (device assignment to VMs then moves whole groups).\n", groupList(r.IOMMUGroups))
	}
	if len(r.Advice) > 0 {
		b.WriteString("\nAdvice, never applied by p2pcheck:\n")
		for _, a := range r.Advice {
			fmt.Fprintf(&b, "  %s (%s): %s\n", a.ID, a.Status, a.Summary)
			for _, f := range a.Remediation {
				fmt.Fprintf(&b, "      %s\n", f)
			}
		}
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "\nwarning: %s\n", w)
	}
	fmt.Fprintf(&b, "\nresult: %s\n", r.Result)
	_, err := io.WriteString(w, b.String())
	return err
}

func groupList(g []int) string {
	if len(g) == 0 {
		return "none known"
	}
	return joinInts(g)
}

// clause is the first clause of a reason, for a table cell.
func clause(reason string) string {
	if i := strings.IndexAny(reason, ":;"); i > 0 {
		return reason[:i]
	}
	return reason
}
