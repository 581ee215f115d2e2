package render

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pcie"
)

// PairReport is everything `p2pcheck pair A B` explains.
type PairReport struct {
	Path    pcie.Path
	Verdict p2pdma.Verdict
	// Reverse is the verdict with the roles swapped: the kernel's answer is not
	// symmetric when ACS sits on one side only.
	Reverse p2pdma.Verdict
	// NVSMI and NCCL are the path classes as nvidia-smi and NCCL name them.
	NVSMI, NCCL string
	// BootFix is the boot-time fix for the analysed kernel, as `p2pcheck fix` makes
	// it (provision.NewBootParam): the parameter, or why none keeps it; empty gives
	// the kernel's own suggestion (Verdict.Fix.KernelParam).
	BootFix string
}

// PairText explains one pair hop by hop: each function on the path with its port
// type, link and ACS Control, which of them the kernel checks, where the path
// turns, then the verdict, the reason and the fix.
func PairText(w io.Writer, r PairReport, s Style) error {
	p := newPrinter(w)
	v := r.Verdict
	p.line(fmt.Sprintf("%s %s  →  %s %s", s.bold("provider"), titleOf(r.Path.From), s.bold("client"), titleOf(r.Path.To)))
	p.line("")
	p.line("path:")
	// The hops climb from the provider to the turning point, then descend: with a
	// common bridge the turn is that bridge, else the root complex after the
	// provider's own chain (itself and its ancestors).
	turnAt := len(r.Path.From.Ancestors())
	for i, h := range r.Path.Hops {
		if h.Device == r.Path.Common {
			turnAt = i
		}
	}
	for i, h := range r.Path.Hops {
		d := h.Device
		var notes []string
		if pt, ok := d.PortType(); ok {
			notes = append(notes, pt.String())
		}
		if l := linkText(d, h.Link, s); l != "" {
			notes = append(notes, l)
		}
		if acs, known := d.ACS(); !known {
			notes = append(notes, s.dim("ACS unknown"))
		} else if acs != nil {
			notes = append(notes, "ACSCtl "+acsBits(acs.Control, s))
		}
		if slices.Contains(v.ACSRedirect, d.Address) {
			notes = append(notes, s.bad("← ACS redirect"))
		}
		var marker string
		switch {
		case d == r.Path.Common:
			marker = "◆ "
			notes = append(notes, s.bold("common upstream bridge: the path turns here"))
		case i <= turnAt:
			marker = "↑ "
		default:
			marker = "↓ "
		}
		p.line(strings.TrimRight(fmt.Sprintf("  %s%s %s", marker, d.Address, strings.Join(notes, " · ")), " "))
		if r.Path.Common == nil && i == turnAt {
			p.line(fmt.Sprintf("  ◆ %s", s.bold(hostTurn(r.Path))))
		}
	}
	if l := r.Path.Narrowest; l.Known() {
		p.line(fmt.Sprintf("  narrowest link: %s", l))
	}
	p.line("")
	p.line(fmt.Sprintf("kernel verdict:  %s, distance %d", mapTypeWord(v.MapType, s), v.Distance))
	if r.Reverse.MapType != v.MapType {
		p.line(fmt.Sprintf("reverse (client as provider): %s, distance %d", r.Reverse.MapType, r.Reverse.Distance))
	}
	if r.NVSMI != "" {
		line := "path class:      " + r.NVSMI + " (nvidia-smi)"
		if r.NCCL != "" && r.NCCL != r.NVSMI {
			line += ", " + r.NCCL + " (NCCL)"
		}
		p.line(line)
	}
	p.line("why:             " + Escape(v.Reason))
	for _, u := range v.Unknowns {
		p.line("unknown:         " + s.warn(Escape(u.String())))
	}
	if v.Fix != nil {
		p.line("")
		if r.BootFix != "" {
			p.line("fix (boot):      " + s.bold(Escape(r.BootFix)))
		} else {
			p.line("fix (boot):      add the kernel parameter " + s.bold(`"`+v.Fix.KernelParam()+`"`))
		}
		for i, c := range v.Fix.Setpci() {
			label := "fix (runtime):   "
			if i > 0 {
				label = "                 "
			}
			p.line(label + s.bold(c))
		}
		p.line(s.dim("                 (both loosen IOMMU isolation; the runtime form is lost at reboot and undone when the kernel restores the port's state)"))
	}
	return p.done()
}

func hostTurn(path pcie.Path) string {
	switch {
	case path.FromHost == nil || path.ToHost == nil:
		return "no common bridge: the path turns at the root complex"
	case path.FromHost == path.ToHost:
		return "no common bridge: the path turns at host bridge " + path.FromHost.Name
	}
	return fmt.Sprintf("no common bridge: the path crosses host bridges %s and %s", path.FromHost.Name, path.ToHost.Name)
}

func titleOf(d *pcie.Device) string {
	if d == nil {
		return "?"
	}
	return d.Address.String() + " " + deviceTitle(d)
}

// PairSchemaVersion is the version of schema/pair.v1.json that PairJSON writes in
// "schema_version".
const PairSchemaVersion = "1"

// PairJSON writes the pair explanation for programs.
func PairJSON(w io.Writer, r PairReport) error {
	type hop struct {
		Address     pcie.Address `json:"address"`
		PortType    *string      `json:"port_type"`
		Link        linkDoc      `json:"link"`
		ACS         acsDoc       `json:"acs"`
		ACSRedirect bool         `json:"acs_redirect"`
		Common      bool         `json:"common_upstream"`
	}
	doc := struct {
		SchemaVersion string         `json:"schema_version"`
		Provider      pcie.Address   `json:"provider"`
		Client        pcie.Address   `json:"client"`
		Hops          []hop          `json:"hops"`
		Common        *pcie.Address  `json:"common_upstream"`
		Verdict       p2pdma.Verdict `json:"verdict"`
		Reverse       p2pdma.Verdict `json:"reverse"`
		NVSMI         string         `json:"path_type"`
		NCCL          string         `json:"nccl_path_type"`
	}{SchemaVersion: PairSchemaVersion, Provider: r.Verdict.Provider, Client: r.Verdict.Client, Hops: []hop{}, Verdict: r.Verdict, Reverse: r.Reverse, NVSMI: r.NVSMI, NCCL: r.NCCL}
	if r.Path.Common != nil {
		doc.Common = &r.Path.Common.Address
	}
	for _, h := range r.Path.Hops {
		dd := newDeviceDoc(h.Device)
		doc.Hops = append(doc.Hops, hop{
			Address: h.Device.Address, PortType: dd.PortType,
			Link: newLinkDoc(h.Device, h.Link),
			ACS:  dd.ACS, ACSRedirect: slices.Contains(r.Verdict.ACSRedirect, h.Device.Address), Common: h.Device == r.Path.Common,
		})
	}
	return writeJSON(w, doc)
}
