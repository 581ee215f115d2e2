package provision

import (
	"fmt"
	"strings"

	"github.com/p2pkit/p2pkit/kversion"
	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pcie"
)

// This file chooses the boot parameter that keeps a plan's ACS Control values, in the
// form the kernel that parses it understands, and says what each function named in it
// reads after a boot. The kernel's history (drivers/pci/pci.c; sources in docs/fix.md):
//
//   - 4.19 (commit aaca43fda742): pci=disable_acs_redir=, whose pci_disable_acs_redir()
//     clears RR, CR and EC in what pci_enable_acs() has just set. Devices are matched
//     by pci_dev_str_match(), which takes a path from the root bus.
//   - 6.11 (commit 47c8846a49ba, "PCI: Extend ACS configurability"): pci=config_acs=
//     and one __pci_config_acs() for both parameters. Until its fix it keeps no value
//     reliably: disable_acs_redir sets every bit outside RR, CR and EC and takes those
//     three from the firmware's value, config_acs overwrites its mask after the first
//     device (the rest fail to parse) and also takes the bits it clears from the
//     firmware.
//   - 9cf8a952d57b ("PCI/ACS: Fix 'pci=config_acs=' parameter", v6.15, and the
//     stable releases 6.12.23, 6.13.11 and 6.14.2 of 2025-04-10): Control becomes
//     (fw_ctrl & ~mask) | (flags & mask), fw_ctrl being what the firmware left. So
//     disable_acs_redir now also drops the SV and UF bits the kernel set (0x001d
//     becomes 0x0000 where the firmware left 0), and config_acs with every bit in its
//     mask gives exactly the value asked for.

// Kernel releases at which the ACS boot parameters change.
var (
	kernelDisableACSRedir = kversion.Version{Major: 4, Minor: 19}
	kernelConfigACS       = kversion.Version{Major: 6, Minor: 11}
	kernelConfigACSFixed  = kversion.Version{Major: 6, Minor: 15}
	// configACSFixedStable are the first stable releases with 9cf8a952d57b.
	configACSFixedStable = []kversion.Version{
		{Major: 6, Minor: 12, Patch: 23}, {Major: 6, Minor: 13, Patch: 11}, {Major: 6, Minor: 14, Patch: 2},
	}
)

// fixedKernels names the releases with a working pci=config_acs=, for texts.
const fixedKernels = "6.12.23, 6.13.11, 6.14.2, 6.15 or later"

// acsControlBits are the ACS Control bits pci=config_acs= can set
// (PCI_ACS_SV through PCI_ACS_DT; __pci_config_acs() refuses a mask outside them).
const acsControlBits = 0x007f

// Form is how a plan is kept across a reboot.
type Form string

// The forms.
const (
	FormNone            Form = ""                  // nothing to keep
	FormDisableACSRedir Form = "disable_acs_redir" // pci=disable_acs_redir=
	FormConfigACS       Form = "config_acs"        // pci=config_acs=
	FormRuntimeOnly     Form = "runtime-only"      // no parameter of this kernel keeps the plan
	FormBrokenKernel    Form = "broken-kernel"     // this kernel's parser keeps no value reliably
	FormUnknownKernel   Form = "unknown-kernel"    // the kernel release is unknown
)

// Setting is the ACS Control value a plan wants on one function.
type Setting struct {
	Device *pcie.Device
	// Control is ACS Control as read, Planned the value wanted.
	Control, Planned uint16
}

// BootParam is the boot parameter that keeps a set of Settings, for one kernel.
type BootParam struct {
	Form Form
	// Kernel is the release the form was chosen for.
	Kernel kversion.Version
	// Param is the parameter, "pci=disable_acs_redir=..." or "pci=config_acs=...";
	// empty unless Form is one of those two.
	Param string
	// Reason says why this form, or why no parameter keeps the plan.
	Reason string
	// Boot is ACS Control of each function Param names after a boot with it, as the
	// kernel computes it, in the order of the Settings.
	Boot []Setting
}

// Usable reports whether Param keeps the plan.
func (b BootParam) Usable() bool { return b.Param != "" }

// NewBootParam returns the parameter that keeps settings on kernel k, in the form k
// parses, naming each function as [DeviceSpec] does. Settings whose Planned equals
// Control are left out.
func NewBootParam(k kversion.Version, settings []Setting) BootParam {
	var s []Setting
	for _, x := range settings {
		if x.Planned != x.Control {
			s = append(s, x)
		}
	}
	if len(s) == 0 {
		return BootParam{}
	}
	b := bootParam(k, s)
	b.Kernel = k
	return b
}

func bootParam(k kversion.Version, s []Setting) BootParam {
	clearOnly := redirectClearOnly(s)
	switch {
	case k.IsZero():
		return BootParam{Form: FormUnknownKernel, Reason: "the kernel release is unknown (/proc/version was not read): " +
			"pass --kernel-version X.Y.Z to choose the boot parameter that kernel parses"}
	case k.Compare(kernelDisableACSRedir) < 0:
		return BootParam{Form: FormRuntimeOnly, Reason: fmt.Sprintf("Linux %s has no ACS boot parameter "+
			"(pci=disable_acs_redir= came with 4.19): repeat the runtime step at every boot", k)}
	case k.Compare(kernelConfigACS) < 0 && !clearOnly:
		return BootParam{Form: FormRuntimeOnly, Reason: fmt.Sprintf("the plan sets ACS bits that only "+
			"pci=config_acs= can set (Linux 6.11 and later, working from %s), and Linux %s has "+
			"pci=disable_acs_redir= alone, which only clears RR, CR and EC: repeat the runtime step at every boot", fixedKernels, k)}
	case k.Compare(kernelConfigACS) < 0:
		return disableACSRedir(k, s)
	case !configACSFixed(k):
		return BootParam{Form: FormBrokenKernel, Reason: fmt.Sprintf("Linux %s has the ACS parameter parser of "+
			"6.11 (commit 47c8846a49ba) without its fix 9cf8a952d57b: pci=disable_acs_redir= sets every "+
			"other ACS bit and takes RR, CR and EC from the firmware, pci=config_acs= applies to its first "+
			"device only; neither keeps this plan. Use a fixed kernel (%s), and until then repeat the runtime "+
			"step at every boot", k, fixedKernels)}
	}
	return configACS(k, s)
}

// redirectClearOnly reports whether every setting only clears RR, CR and EC: what
// pci=disable_acs_redir= does.
func redirectClearOnly(s []Setting) bool {
	for _, x := range s {
		if x.Planned != x.Control&^p2pdma.RedirectMask {
			return false
		}
	}
	return true
}

// configACSFixed reports whether k carries commit 9cf8a952d57b.
func configACSFixed(k kversion.Version) bool {
	if k.Compare(kernelConfigACSFixed) >= 0 {
		return true
	}
	for _, f := range configACSFixedStable {
		if k.Series() == f.Series() {
			return k.Patch >= f.Patch
		}
	}
	return false
}

// disableACSRedir is pci=disable_acs_redir= before 6.11: pci_disable_acs_redir()
// clears RR, CR and EC in the value pci_enable_acs() set, which is the value read
// now unless something changed it since boot.
func disableACSRedir(k kversion.Version, s []Setting) BootParam {
	specs := make([]string, len(s))
	boot := make([]Setting, len(s))
	for i, x := range s {
		specs[i] = DeviceSpec(x.Device)
		boot[i] = Setting{Device: x.Device, Control: x.Control, Planned: x.Control &^ p2pdma.RedirectMask}
	}
	return BootParam{Form: FormDisableACSRedir, Param: "pci=disable_acs_redir=" + strings.Join(specs, ";"), Boot: boot,
		Reason: fmt.Sprintf("Linux %s (4.19 to 6.10) clears RR, CR and EC in the value it set itself on the "+
			"functions pci=disable_acs_redir= names (pci_disable_acs_redir(), drivers/pci/pci.c)", k)}
}

// configACS is pci=config_acs= on a kernel with 9cf8a952d57b: every one of the seven
// bits is given ("0010001@" for 0x0011), so the firmware's value plays no part and
// the isolation bits the plan keeps (SV, UF) stay set.
func configACS(k kversion.Version, s []Setting) BootParam {
	specs := make([]string, len(s))
	for i, x := range s {
		specs[i] = fmt.Sprintf("%07b@%s", x.Planned&acsControlBits, DeviceSpec(x.Device))
	}
	why := fmt.Sprintf("Linux %s computes both ACS parameters from the firmware's ACS Control "+
		"(__pci_config_acs(), drivers/pci/pci.c, since commit 9cf8a952d57b), so pci=disable_acs_redir= "+
		"would also drop the SV and UF bits the kernel sets; pci=config_acs= names all seven bits and "+
		"gives exactly the planned value", k)
	return BootParam{Form: FormConfigACS, Param: "pci=config_acs=" + strings.Join(specs, ";"), Boot: s, Reason: why}
}

// Setpci returns the setpci command that sets the bits of mask in ACS Control of the
// function at a to those of value, other bits kept (setpci's "value:mask" form).
func Setpci(a pcie.Address, mask, value uint16) string {
	return fmt.Sprintf("setpci -s %s ECAP_ACS+6.w=%04x:%04x", a, value&mask, mask)
}

// CommandLineSize is COMMAND_LINE_SIZE on x86 (arch/x86/include/asm/setup.h) and arm64
// (arch/arm64/include/uapi/asm/setup.h): the kernel keeps at most one byte less of
// the command line the boot loader passes.
const CommandLineSize = 2048

// Fits reports whether the command line cmdline with the parameter added (quoted, as
// the drop-in writes it) stays within the kernel's limit, and how long it would be.
func (b BootParam) Fits(cmdline string) (length int, ok bool) {
	length = len(strings.TrimSpace(cmdline)) + len(` ""`) + len(b.Param)
	return length, length <= CommandLineSize-1
}

// Parser is how one kernel release applies the ACS boot parameters.
type Parser struct{ k kversion.Version }

// ParserOf returns how kernel k applies the ACS boot parameters.
func ParserOf(k kversion.Version) Parser { return Parser{k: k} }

// Applies returns "" when the kernel applies the parameter name
// ("disable_acs_redir", "config_acs") so that the functions it names hold the bits
// it gives (RR, CR and EC clear; the bits of a config_acs mask as its flags), else
// why that cannot be told.
func (p Parser) Applies(name string) string {
	k := p.k
	switch {
	case k.IsZero():
		return "the kernel release is unknown, so what the parameter set cannot be told"
	case k.Compare(kernelDisableACSRedir) < 0:
		return fmt.Sprintf("Linux %s has no ACS boot parameter", k)
	case name == "config_acs" && k.Compare(kernelConfigACS) < 0:
		return fmt.Sprintf("Linux %s does not know pci=config_acs= (6.11 and later) and ignores it", k)
	case k.Compare(kernelConfigACS) >= 0 && !configACSFixed(k):
		return fmt.Sprintf("Linux %s has the parser of commit 47c8846a49ba without its fix 9cf8a952d57b, which takes bits "+
			"from the firmware's value: what it set cannot be told", k)
	}
	return ""
}

// ClearRedirectParam is NewBootParam for clearing RR, CR and EC on the functions of
// t at addrs, every other bit kept: the kernel's own fix for a pair
// (p2pdma.Fix.Bridges). The report's acs_path, `p2pcheck pair` and `p2pcheck fix`
// all make the boot parameter of that fix here, so they show one form for one
// kernel.
func ClearRedirectParam(t *pcie.Topology, k kversion.Version, addrs []pcie.Address) BootParam {
	var s []Setting
	for _, a := range addrs {
		if d := t.Device(a); d != nil {
			if acs, _ := d.ACS(); acs != nil {
				s = append(s, Setting{Device: d, Control: acs.Control, Planned: acs.Control &^ p2pdma.RedirectMask})
			}
		}
	}
	return NewBootParam(k, s)
}
