package p2pdma

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/p2pkit/p2pkit/pcie"
)

// ErrBadAssumption is returned (wrapped) by [Assumptions.Set] for a what-if it does
// not know.
var ErrBadAssumption = errors.New("p2pdma: bad assumption")

// ACSAssumption says what to assume about ACS redirect in ACS Control.
type ACSAssumption uint8

// ACS assumptions.
const (
	// ACSAsRead keeps ACS Control as it was read.
	ACSAsRead ACSAssumption = iota
	// ACSRedirectOff assumes RR, CR and EC clear on every function with an ACS
	// capability: what pci=disable_acs_redir= (pci_disable_acs_redir() in
	// drivers/pci/pci.c) does to the functions it names, or `p2pcheck fix --apply`
	// to the bridges on peer paths.
	ACSRedirectOff
	// ACSRedirectOn assumes ACS Control as pci_std_enable_acs() in
	// drivers/pci/pci.c programs it once an IOMMU asked for ACS (pci_acs_enable):
	// SV, RR, CR and UF set wherever the ACS Capability register offers them, on top
	// of what is set already. Device-specific ACS quirks (pci_dev_specific_enable_acs)
	// are not modelled.
	ACSRedirectOn
)

// CPUAssumption says what to assume about the CPU for cpu_supports_p2pdma().
type CPUAssumption uint8

// CPU assumptions.
const (
	// CPUAsRead keeps the CPU read from /proc/cpuinfo.
	CPUAsRead CPUAssumption = iota
	// CPUAMDZen assumes an AMD Zen CPU (AuthenticAMD, family 0x17), which
	// cpu_supports_p2pdma() in drivers/pci/p2pdma.c accepts.
	CPUAMDZen
	// CPUIntel assumes an Intel CPU (GenuineIntel, family 6), which it does not.
	CPUIntel
)

// Assumptions are what-if changes to the facts a verdict depends on. The zero value
// assumes nothing. Apply them with [Assumptions.Topology] and [Assumptions.Platform]
// and give the results to [NewCalculator]: the verdicts are then those the kernel
// would compute on the changed machine.
type Assumptions struct {
	ACS ACSAssumption
	CPU CPUAssumption
	// ClearRedirect lists functions on which RR, CR and EC are assumed cleared in
	// ACS Control, every other bit kept: the runtime action of `p2pcheck fix`.
	ClearRedirect []pcie.Address
}

// Set parses one assumption, "acs-redirect=off|on" or "cpu=amd-zen|intel", into a;
// a later one of the same kind replaces an earlier one. It suits a repeated flag.
func (a *Assumptions) Set(s string) error {
	key, val, _ := strings.Cut(s, "=")
	switch {
	case key == "acs-redirect" && val == "off":
		a.ACS = ACSRedirectOff
	case key == "acs-redirect" && val == "on":
		a.ACS = ACSRedirectOn
	case key == "cpu" && val == "amd-zen":
		a.CPU = CPUAMDZen
	case key == "cpu" && val == "intel":
		a.CPU = CPUIntel
	default:
		return fmt.Errorf("%w %q: want acs-redirect=off, acs-redirect=on, cpu=amd-zen or cpu=intel", ErrBadAssumption, s)
	}
	return nil
}

// Strings returns the assumptions in the form Set takes, ClearRedirect as
// "clear-acs-redirect=<bdf>" (one per function); empty for none.
func (a Assumptions) Strings() []string {
	var out []string
	switch a.ACS {
	case ACSRedirectOff:
		out = append(out, "acs-redirect=off")
	case ACSRedirectOn:
		out = append(out, "acs-redirect=on")
	}
	switch a.CPU {
	case CPUAMDZen:
		out = append(out, "cpu=amd-zen")
	case CPUIntel:
		out = append(out, "cpu=intel")
	}
	for _, x := range a.ClearRedirect {
		out = append(out, "clear-acs-redirect="+x.String())
	}
	return out
}

// IsZero reports whether a assumes nothing.
func (a Assumptions) IsZero() bool {
	return a.ACS == ACSAsRead && a.CPU == CPUAsRead && len(a.ClearRedirect) == 0
}

// Platform returns plat under the CPU assumption.
func (a Assumptions) Platform(plat Platform) Platform {
	switch a.CPU {
	case CPUAMDZen:
		plat.CPUVendor, plat.CPUFamily = "AuthenticAMD", 0x17
	case CPUIntel:
		plat.CPUVendor, plat.CPUFamily = "GenuineIntel", 6
	}
	return plat
}

// Topology returns the tree t would be once ACS Control holds what a assumes: it
// rebuilds t from its functions' records with the ACS Control word of their config
// bytes changed, so the result is what reading the changed machine would give. A
// function whose ACS capability was not read stays unknown. t itself is not
// changed; with no ACS assumption, t is returned as it is. Names from pci.ids are
// not carried over.
func (a Assumptions) Topology(t *pcie.Topology) *pcie.Topology {
	if a.ACS == ACSAsRead && len(a.ClearRedirect) == 0 {
		return t
	}
	control := map[pcie.Address]uint16{}
	for _, d := range t.Devices {
		acs, known := d.ACS()
		if !known || acs == nil {
			continue
		}
		ctl := acs.Control
		switch a.ACS {
		case ACSRedirectOff:
			ctl &^= acsRedirectMask
		case ACSRedirectOn:
			ctl |= acs.Capability & (pcie.ACSSourceValidation | pcie.ACSRequestRedirect |
				pcie.ACSCompletionRedirect | pcie.ACSUpstreamForwarding)
		}
		if slices.Contains(a.ClearRedirect, d.Address) {
			ctl &^= acsRedirectMask
		}
		control[d.Address] = ctl
	}
	return t.WithACSControl(control)
}

// RedirectMask is the ACS Control bits whose being set makes
// pci_bridge_has_acs_redir() in drivers/pci/p2pdma.c true: RR, CR and EC (0x002c).
const RedirectMask = acsRedirectMask
