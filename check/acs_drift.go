package check

import (
	"fmt"

	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/provision"
)

// refRestoreState is why ACS set at run time does not last.
const refRestoreState = "linux drivers/pci/pci.c pci_restore_state() (calls pci_enable_acs())"

// expectedACS is what one source says ACS Control of one function must hold: the
// bits of mask as in value.
type expectedACS struct {
	addr        pcie.Address
	mask, value uint16
	source      string
}

// checkACSDrift notices a bridge whose ACS Control no longer holds what the last
// `p2pcheck fix --apply` set (its record, /run/p2pcheck/acs-applied.json, which a
// boot empties) or what the ACS boot parameter on the kernel command line set at
// enumeration, as the running kernel applies it (provision.MatchSpecs and the
// per-release rules of provision.NewBootParam). The kernel restores a port's saved
// state, and with it re-runs pci_enable_acs(), on resume from suspend, runtime D3,
// AER or DPC recovery and after a reset (pci_restore_state()), which undoes a
// runtime change; what the kernel set at boot it sets again. A drift is a warning:
// acs_path judges what it does to the pairs. It does not apply without a record or a
// parameter.
func checkACSDrift(f *Facts) Result {
	r := Result{Refs: []string{docRef("acs_drift"), refRestoreState, refConfigACS, "docs/fix.md"}}
	want, notes := f.expectedACS()
	if len(want) == 0 {
		r.Status, r.Summary = Skip, "no record of p2pcheck fix --apply (/"+provision.StatePath+") and no ACS boot parameter"
		if len(notes) > 0 {
			r.Summary += "; " + notes[0]
		}
		return r
	}
	held, unread := 0, 0
	r.Status = Pass
	for _, e := range want {
		d := f.Node.Topology.Device(e.addr)
		if d == nil {
			r.Findings = append(r.Findings, Finding{Subject: e.addr.String(), Status: Warn, Message: e.source + " names a function that is not there"})
			r.Status = worse(r.Status, Warn)
			continue
		}
		acs, known := d.ACS()
		switch {
		case !known:
			unread++
			r.Findings = append(r.Findings, Finding{Subject: e.addr.String(), Status: Unknown, Message: "ACS Control not read"})
			r.Status = worse(r.Status, Unknown)
		case acs == nil:
			r.Findings = append(r.Findings, Finding{Subject: e.addr.String(), Status: Warn, Message: e.source + " names a function without an ACS capability"})
			r.Status = worse(r.Status, Warn)
		case acs.Control&e.mask != e.value:
			r.Findings = append(r.Findings, Finding{Subject: e.addr.String(), Status: Warn, Message: fmt.Sprintf(
				"ACSCtl %s (%#04x): the bits %#04x are %#04x, %s set them to %#04x; the kernel restored the port "+
					"(pci_restore_state(): resume, runtime D3, AER or DPC recovery, a reset) or something wrote it",
				pcie.ACSString(acs.Control), acs.Control, e.mask, acs.Control&e.mask, e.source, e.value)})
			r.Subjects = append(r.Subjects, e.addr.String())
			r.Status = worse(r.Status, Warn)
		default:
			held++
		}
	}
	r.Evidence = append(r.Evidence, Evidence{Source: "/" + provision.StatePath, Value: fmt.Sprintf("%d byte(s)", len(f.Node.Platform.ACSApplied))})
	switch r.Status {
	case Pass:
		r.Summary = fmt.Sprintf("ACS holds what fix --apply and the boot parameter set on all %d function(s)", held)
	case Unknown:
		r.Summary = fmt.Sprintf("ACS Control of %d of %d function(s) not read: %s", unread, len(want), f.unreadable())
		r.Remediation = []string{f.seeConfig("ACS Control")}
	default:
		r.Summary = fmt.Sprintf("ACS drifted on %d of %d function(s) since fix --apply or the boot", len(r.Subjects), len(want))
		r.Remediation = []string{"p2pcheck fix --apply sets it again (and records it); the boot parameter (p2pcheck fix --persist) sets it at every boot, not after a restore"}
	}
	for _, n := range notes {
		r.Findings = append(r.Findings, Finding{Subject: "boot parameter", Status: Skip, Message: n})
	}
	return r
}

// expectedACS collects what fix --apply's record and the boot parameters say, and
// notes what could not be told.
func (f *Facts) expectedACS() ([]expectedACS, []string) {
	var out []expectedACS
	var notes []string
	if b := f.Node.Platform.ACSApplied; b != nil {
		s, ds, err := provision.ParseState(b)
		if err != nil {
			notes = append(notes, err.Error())
		}
		for _, d := range ds {
			out = append(out, expectedACS{addr: d.Address, mask: d.Mask, value: d.Value,
				source: "p2pcheck fix --apply (" + s.Use + ", Linux " + s.Kernel + ")"})
		}
	}
	c := f.Node.Platform.Cmdline
	if c == nil {
		return out, notes
	}
	form := provision.ParserOf(f.Node.Release())
	for _, opt := range c.PCI() {
		flags := opt.Name == "config_acs"
		if opt.Name != "disable_acs_redir" && !flags {
			continue
		}
		if n := form.Applies(opt.Name); n != "" {
			notes = append(notes, "pci="+opt.Name+"=: "+n)
			continue
		}
		match, bad := provision.MatchSpecs(f.Node.Topology, opt.Value, flags)
		if bad {
			notes = append(notes, "pci="+opt.Name+"= has an entry the kernel does not parse: the entries after it were not applied")
		}
		for _, d := range f.Node.Topology.Devices {
			fl, ok := match[d]
			if !ok {
				continue
			}
			e := expectedACS{addr: d.Address, mask: p2pdma.RedirectMask, source: "pci=disable_acs_redir="}
			if flags {
				e.mask, e.value = provision.FlagsMask(fl)
				e.source = "pci=config_acs=" + fl
			}
			out = append(out, e)
		}
	}
	return out, notes
}
