package p2pdma

import (
	"encoding/json"
	"strings"

	"github.com/p2pkit/p2pkit/pcie"
)

// Fix turns off ACS redirection on the functions of Verdict.ACSRedirect. Either form
// it offers, the boot parameter ([Fix.KernelParam]) or one setpci per function
// ([Fix.Setpci]), makes the pair bus-addr; both also loosen IOMMU isolation (groups
// may merge).
type Fix struct {
	// Bridges are the functions whose ACS redirect bits to clear, in the kernel's
	// order (those of Verdict.ACSRedirect).
	Bridges []pcie.Address
}

// SetpciClearArgs is what setpci writes to clear RR, CR and EC in ACS Control and
// keep every other bit: setpci's value:mask form, which changes only the bits in
// the mask, so it is right even if Control changed after the topology was read.
const SetpciClearArgs = "ECAP_ACS+6.w=0000:002c"

// SetpciClear is the command that clears ACS redirect on the function at a at run
// time. The setting is lost at reboot and on a device reset, and a provider whose
// verdict the kernel already cached keeps it until it is registered again.
func SetpciClear(a pcie.Address) string { return "setpci -s " + a.String() + " " + SetpciClearArgs }

// KernelParam is the boot parameter the kernel itself suggests for bridges,
// "pci=disable_acs_redir=<bdf>;<bdf>" (pci_disable_acs_redir() in drivers/pci/pci.c
// applies it at enumeration). Quote it in the boot loader's configuration, the
// semicolon is part of it.
func KernelParam(bridges []pcie.Address) string {
	names := make([]string, len(bridges))
	for i, a := range bridges {
		names[i] = a.String()
	}
	return "pci=disable_acs_redir=" + strings.Join(names, ";")
}

// KernelParam is [KernelParam] of the fix's bridges.
func (f *Fix) KernelParam() string { return KernelParam(f.Bridges) }

// Setpci is one [SetpciClear] command per bridge, in order.
func (f *Fix) Setpci() []string {
	out := make([]string, len(f.Bridges))
	for i, a := range f.Bridges {
		out[i] = SetpciClear(a)
	}
	return out
}

// MarshalJSON writes the fix as the pairs JSON shows it: both forms, as text.
func (f *Fix) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		KernelParam string   `json:"kernel_param"`
		Setpci      []string `json:"setpci"`
	}{f.KernelParam(), f.Setpci()})
}
