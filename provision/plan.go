// Package provision plans and performs what makes a node's peer paths P2P-ready:
// clearing ACS redirect (RR, CR and EC in ACS Control, the bits
// pci_bridge_has_acs_redir() in drivers/pci/p2pdma.c tests) on exactly the functions
// that stand between the peers of interest, the boot parameter that keeps it so,
// and the advice it never applies itself. It is what `p2pcheck fix` runs.
//
// Planning is pure: [NewPlan] works on a [pcie.Topology] and the P2PDMA platform
// facts, and predicts each pair's verdict after the runtime actions with the same
// engine as `p2pcheck pairs --assume` ([p2pdma.Assumptions]). [Apply] performs the
// runtime actions through sysfs config files ([sysfs.ClearACSControl]); the caller
// then reads the machine again and compares ([Plan.Compare]).
package provision

import (
	"fmt"
	"slices"
	"strings"

	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pcie"
)

// Pair is one ordered pair of interest.
type Pair struct {
	Provider, Client *pcie.Device
	// Before is the verdict on the machine as read; Predicted the verdict once the
	// plan's runtime actions are done.
	Before, Predicted p2pdma.Verdict
}

// Action clears ACS redirect on one function: the runtime action.
type Action struct {
	Device *pcie.Device
	// CapOffset is the offset of the ACS capability; ACS Control is at CapOffset+6.
	CapOffset uint16
	// Control is ACS Control as read, Planned the value after clearing RR, CR and EC.
	Control, Planned uint16
	// Setpci is the equivalent setpci command.
	Setpci string
	// Pairs counts the pairs of interest whose path it stands on.
	Pairs int
	// IOMMUGroups are the groups of the function and of every function below it,
	// ascending: the isolation the change gives up once groups are formed again at
	// the next boot with the boot parameter.
	IOMMUGroups []int
}

// Plan is what `p2pcheck fix` would do, in causal order: the runtime actions, then
// the boot parameter that makes them persistent.
type Plan struct {
	Pairs   []Pair
	Actions []Action
	// KernelParam is pci=disable_acs_redir= for the functions of Actions in the path
	// form (see DeviceSpec); empty when there is nothing to do.
	KernelParam string
	// Unknown lists why pairs could not be evaluated (facts not read, usually config
	// space without root); a plan with unknowns is incomplete.
	Unknown []string
}

// interesting decides which pairs are of interest: GPU and NIC, GPU and NVMe, GPU and GPU,
// and a p2pmem provider with any other device of interest, both ways.
func interesting(a, b *pcie.Device) bool {
	switch {
	case a.P2PMem != nil || b.P2PMem != nil:
		return true
	case a.IsGPU() && (b.IsGPU() || b.IsNIC() || b.IsNVMe()):
		return true
	case b.IsGPU() && (a.IsNIC() || a.IsNVMe()):
		return true
	}
	return false
}

// PairsOfInterest returns the ordered pairs of distinct functions of devs that the
// fix is about (GPU<->NIC, GPU<->NVMe, GPU<->GPU, p2pmem provider<->any other),
// provider-major in the order of devs.
func PairsOfInterest(devs []*pcie.Device) [][2]*pcie.Device {
	var out [][2]*pcie.Device
	for _, a := range devs {
		for _, b := range devs {
			if a != b && interesting(a, b) {
				out = append(out, [2]*pcie.Device{a, b})
			}
		}
	}
	return out
}

// AllPairs returns every ordered pair of distinct functions of devs, for
// `fix --pairs A,B`.
func AllPairs(devs []*pcie.Device) [][2]*pcie.Device {
	var out [][2]*pcie.Device
	for _, a := range devs {
		for _, b := range devs {
			if a != b {
				out = append(out, [2]*pcie.Device{a, b})
			}
		}
	}
	return out
}

// NewPlan evaluates pairs on t and plans the runtime actions: every function that a
// pair's verdict names in ACSRedirect (the kernel's own list of what to put in
// pci=disable_acs_redir=) gets RR, CR and EC cleared, in address order. It then
// predicts each pair's verdict with those cleared ([p2pdma.Assumptions]).
func NewPlan(t *pcie.Topology, plat p2pdma.Platform, pairs [][2]*pcie.Device) Plan {
	var p Plan
	calc := p2pdma.NewCalculator(t, plat)
	count := map[pcie.Address]int{}
	for _, pr := range pairs {
		v := calc.Calc(pr[0], pr[1])
		p.Pairs = append(p.Pairs, Pair{Provider: pr[0], Client: pr[1], Before: v})
		if v.MapType == p2pdma.Unknown {
			p.Unknown = append(p.Unknown, fmt.Sprintf("%s -> %s: %s", v.Provider, v.Client, v.Reason))
		}
		for _, a := range v.ACSRedirect {
			count[a]++
		}
	}
	var clear []pcie.Address
	for a, n := range count {
		d := t.Device(a)
		acs, _ := d.ACS()
		if acs == nil { // ACSRedirect names only functions whose ACS was read
			continue
		}
		p.Actions = append(p.Actions, Action{
			Device: d, CapOffset: acs.Offset, Control: acs.Control,
			Planned: acs.Control &^ p2pdma.RedirectMask,
			Setpci:  fmt.Sprintf("setpci -s %s ECAP_ACS+6.w=0000:%04x", a, p2pdma.RedirectMask),
			Pairs:   n, IOMMUGroups: groupsBelow(t, d),
		})
		clear = append(clear, a)
	}
	slices.SortFunc(p.Actions, func(x, y Action) int { return x.Device.Address.Compare(y.Device.Address) })
	slices.SortFunc(clear, func(x, y pcie.Address) int { return x.Compare(y) })
	specs := make([]string, len(p.Actions))
	for i, a := range p.Actions {
		specs[i] = DeviceSpec(a.Device)
	}
	if len(specs) > 0 {
		p.KernelParam = "pci=disable_acs_redir=" + strings.Join(specs, ";")
	}
	p.predict(t, plat, clear)
	return p
}

// predict fills Pair.Predicted: the verdicts on t with redirect cleared on clear.
func (p *Plan) predict(t *pcie.Topology, plat p2pdma.Platform, clear []pcie.Address) {
	if len(clear) == 0 {
		for i := range p.Pairs {
			p.Pairs[i].Predicted = p.Pairs[i].Before
		}
		return
	}
	after := p2pdma.Assumptions{ClearRedirect: clear}.Topology(t)
	calc := p2pdma.NewCalculator(after, plat)
	for i := range p.Pairs {
		p.Pairs[i].Predicted = calc.Calc(after.Device(p.Pairs[i].Provider.Address), after.Device(p.Pairs[i].Client.Address))
	}
}

// groupsBelow returns the IOMMU groups of d and of every function below it.
func groupsBelow(t *pcie.Topology, d *pcie.Device) []int {
	var out []int
	for _, x := range t.Devices {
		if x.IOMMUGroup == nil || !below(x, d) {
			continue
		}
		if !slices.Contains(out, *x.IOMMUGroup) {
			out = append(out, *x.IOMMUGroup)
		}
	}
	slices.Sort(out)
	return out
}

// below reports whether x is d or lies below it.
func below(x, d *pcie.Device) bool {
	for i := 0; x != nil && i <= 256; i, x = i+1, x.Upstream() {
		if x == d {
			return true
		}
	}
	return false
}

// DeviceSpec returns the device specifier of d for pci=disable_acs_redir= in the
// path form that pci_dev_str_match_path() in drivers/pci/pci.c matches
// (Documentation/admin-guide/kernel-parameters.txt, "pci="): the function on the
// root bus above d with its domain and bus, then the device.function of each
// function on the way down to d, "0000:15:01.0/0.0/1.0". Only the root bus number
// appears, and root buses are numbered by the firmware (ACPI _BBN), not by the
// kernel's enumeration: a card added, removed or given more buses elsewhere
// renumbers the buses below a root port, which would make a plain address name
// another function or none, but leaves the path the same. A function whose path to
// the root bus was not read in full gets its plain address.
func DeviceSpec(d *pcie.Device) string {
	var chain []*pcie.Device
	for x := d; x != nil; x = x.Upstream() {
		if x.PathIncomplete || len(chain) > 256 {
			return d.Address.String()
		}
		chain = append(chain, x)
	}
	top := chain[len(chain)-1]
	if top.HostBridge == nil || top.Address.Bus != top.HostBridge.Bus {
		return d.Address.String()
	}
	var b strings.Builder
	b.WriteString(top.Address.String())
	for i := len(chain) - 2; i >= 0; i-- {
		fmt.Fprintf(&b, "/%x.%x", chain[i].Address.Device, chain[i].Address.Function)
	}
	return b.String()
}

// Changed reports whether the runtime actions change the verdict of any pair.
func (p Plan) Changed() bool {
	return slices.ContainsFunc(p.Pairs, func(pr Pair) bool { return !SameVerdict(pr.Before, pr.Predicted) })
}

// SameVerdict reports whether two verdicts agree on what the kernel decides: map
// type, distance and the functions with ACS redirect on the path.
func SameVerdict(a, b p2pdma.Verdict) bool {
	return a.MapType == b.MapType && a.Distance == b.Distance && slices.Equal(a.ACSRedirect, b.ACSRedirect)
}

// IOMMUGroups returns every group that some action's change affects, ascending.
func (p Plan) IOMMUGroups() []int {
	var out []int
	for _, a := range p.Actions {
		for _, g := range a.IOMMUGroups {
			if !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Compare evaluates the plan's pairs again on after, the machine read once more after
// Apply, and returns each pair's verdict there, in the order of p.Pairs, with the
// pairs whose verdict differs from the prediction. A pair missing from after is
// Unknown.
func (p Plan) Compare(after *pcie.Topology, plat p2pdma.Platform) (verdicts []p2pdma.Verdict, mismatched []int) {
	calc := p2pdma.NewCalculator(after, plat)
	for i, pr := range p.Pairs {
		v := calc.Calc(after.Device(pr.Provider.Address), after.Device(pr.Client.Address))
		if v.Provider != pr.Provider.Address || v.Client != pr.Client.Address {
			v.Provider, v.Client = pr.Provider.Address, pr.Client.Address
		}
		verdicts = append(verdicts, v)
		if !SameVerdict(v, pr.Predicted) {
			mismatched = append(mismatched, i)
		}
	}
	return verdicts, mismatched
}
