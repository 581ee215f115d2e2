// Package provision plans and performs what makes a node's peer paths ready for the
// use the node is for, and is what `p2pcheck fix` runs:
//
//   - on bare metal, ACS redirect cleared (RR, CR and EC in ACS Control, the bits
//     pci_bridge_has_acs_redir() in drivers/pci/p2pdma.c tests) on exactly the
//     functions the kernel checks between the peers of interest;
//   - on a virtualization host, isolation kept (SV, RR, CR and UF, what
//     pci_device_group() in drivers/iommu/iommu.c needs for separate IOMMU groups)
//     and ACS Direct Translated P2P set where a peer with ATS sends translated
//     requests, so that passthrough devices reach each other with addresses the
//     IOMMU translated;
//   - on NVIDIA's platform shapes (see [Shape]), the per-port bits the shape needs;
//
// then the boot parameter that keeps it, in the form the kernel parses
// ([NewBootParam]), the IOMMU groups a reboot with it gives (package iommugroup),
// and the advice it never applies itself.
//
// Planning is pure: [NewPlan] works on a [pcie.Topology] and the P2PDMA platform
// facts, and predicts each pair's verdict after the runtime actions with the same
// engine as `p2pcheck pairs --assume`. [Apply] performs the runtime actions through
// sysfs config files ([sysfs.WriteACSControl]); the caller then reads the machine
// again and compares ([Plan.Compare]).
package provision

import (
	"fmt"
	"slices"

	"github.com/p2pkit/p2pkit/iommugroup"
	"github.com/p2pkit/p2pkit/kversion"
	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pcie"
)

// Mode is what the host's devices are for.
type Mode string

// The modes.
const (
	// ModeBareMetal: the host's own drivers use the devices (a training node);
	// peers reach each other by bus address once ACS redirect is off between them.
	ModeBareMetal Mode = "bare-metal"
	// ModeVirtHost: the host passes devices to VMs, which need separate IOMMU
	// groups; peers reach each other with translated addresses (ATS and Direct
	// Translated P2P).
	ModeVirtHost Mode = "virt-host"
)

// Options say what a plan is for.
type Options struct {
	Mode Mode // "" is ModeBareMetal
	// Kernel is the release the boot parameter is for (the running kernel's, or
	// --kernel-version); the zero Version is unknown.
	Kernel kversion.Version
	// IOMMU is set when an IOMMU is active: the kernel then enables ACS at boot
	// (pci_std_enable_acs() in drivers/pci/pci.c sets the SV, RR, CR and UF the
	// capability offers), and IOMMU groups exist.
	IOMMU bool
}

// Pair is one ordered pair of interest.
type Pair struct {
	Provider, Client *pcie.Device
	// Before is the verdict on the machine as read; Predicted the verdict once the
	// plan's runtime actions are done.
	Before, Predicted p2pdma.Verdict
}

// Action changes ACS Control of one function: the runtime action.
type Action struct {
	Device *pcie.Device
	// CapOffset is the offset of the ACS capability; ACS Control is at CapOffset+6.
	CapOffset uint16
	// Control is ACS Control as read, Planned the value after the action: Control
	// with the bits of Mask set as in Planned.
	Control, Planned, Mask uint16
	// Setpci is the equivalent setpci command.
	Setpci string
	// Why says what the change is for.
	Why string
	// Pairs counts the pairs of interest whose path it stands on.
	Pairs int
	// IOMMUGroups are the groups of the function and of every function below it,
	// ascending, as read.
	IOMMUGroups []int
}

// Plan is what `p2pcheck fix` would do, in causal order: the runtime actions, then
// the boot parameter that makes them persistent.
type Plan struct {
	Mode    Mode
	Pairs   []Pair
	Actions []Action
	// Boot is the boot parameter that keeps the plan (or why none does), for the
	// kernel of Options.Kernel. Its Form is FormNone when there is nothing to keep.
	Boot BootParam
	// Shapes are the NVIDIA platform shapes found (see FindShapes).
	Shapes []Shape
	// GroupsAfter is the IOMMU grouping a reboot with Boot gives, predicted with
	// the kernel's rules (package iommugroup); nil without an IOMMU or when no
	// parameter keeps the plan (the groups then stay as they are).
	GroupsAfter *iommugroup.Prediction
	// GroupsDiffer lists where the kernel's groups as read differ from the
	// prediction for the ACS values as read: a device quirk the prediction does not
	// model, which makes GroupsAfter uncertain.
	GroupsDiffer []iommugroup.Mismatch
	// Notes are what the plan cannot do, in order (a port without Direct
	// Translated P2P, a shape's requirement).
	Notes []string
	// Unknown lists why pairs could not be evaluated (facts not read, usually config
	// space without root); a plan with unknowns is incomplete.
	Unknown []string
	// Decided are the bits the plan decides on every function it touches, in
	// address order, whether or not they already hold: what `fix --apply` records
	// for the report's acs_drift check.
	Decided []Decision
}

// Decision is the bits of Mask that ACS Control of a function must hold as in Value.
type Decision struct {
	Address     pcie.Address
	Mask, Value uint16
}

// interesting decides which pairs are of interest: GPU and NIC (or a NIC's Data
// Direct function), GPU and NVMe, GPU and GPU, and a p2pmem provider with any other
// device of interest, both ways.
func interesting(a, b *pcie.Device) bool {
	nicLike := func(d *pcie.Device) bool { return d.IsNIC() || d.IsNVMe() || IsDataDirect(d) }
	switch {
	case a.P2PMem != nil || b.P2PMem != nil:
		return true
	case a.IsGPU() && (b.IsGPU() || nicLike(b)):
		return true
	case b.IsGPU() && nicLike(a):
		return true
	}
	return false
}

// PairsOfInterest returns the ordered pairs of distinct functions of devs that the
// fix is about (GPU<->NIC or Data Direct function, GPU<->NVMe, GPU<->GPU, p2pmem
// provider<->any other), provider-major in the order of devs.
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

// NewPlan evaluates pairs on t and plans, for the mode of opt, the ACS Control each
// function on their paths must hold: the generic rule of the mode for every pair,
// then the bits of the NVIDIA shapes t has. Functions whose value changes become
// the runtime actions, in address order; those whose value a reboot would not give
// (the kernel's own at boot differs) are named in the boot parameter. Each pair's
// verdict is then predicted with the planned values.
func NewPlan(t *pcie.Topology, plat p2pdma.Platform, pairs [][2]*pcie.Device, opt Options) Plan {
	p := Plan{Mode: opt.Mode, Shapes: FindShapes(t)}
	if p.Mode == "" {
		p.Mode = ModeBareMetal
	}
	calc := p2pdma.NewCalculator(t, plat)
	w := wants{}
	for _, pr := range pairs {
		v := calc.Calc(pr[0], pr[1])
		p.Pairs = append(p.Pairs, Pair{Provider: pr[0], Client: pr[1], Before: v})
		if v.MapType == p2pdma.Unknown {
			p.Unknown = append(p.Unknown, fmt.Sprintf("%s -> %s: %s", v.Provider, v.Client, v.Reason))
			continue
		}
		if p.Mode == ModeVirtHost {
			p.Notes = append(p.Notes, w.virtHost(t, pr[0], pr[1])...)
		} else {
			w.bareMetal(t, pr[0], pr[1])
		}
	}
	for _, s := range p.Shapes {
		p.Notes = append(p.Notes, s.plan(w, p.Mode)...)
	}
	p.Notes = dedupe(p.Notes)
	planned := p.actions(t, w, opt)
	p.predict(t, plat, planned)
	p.groups(t, opt)
	return p
}

// actions turns the wanted bits into the runtime actions and the boot parameter,
// and returns the planned value of every function the plan decides.
func (p *Plan) actions(t *pcie.Topology, w wants, opt Options) map[pcie.Address]uint16 {
	planned := map[pcie.Address]uint16{}
	var boot []Setting
	for _, d := range t.Devices {
		x := w[d]
		acs, _ := d.ACS()
		if x == nil || acs == nil {
			continue
		}
		v := acs.Control&^x.mask | x.value&x.mask
		planned[d.Address] = v
		p.Decided = append(p.Decided, Decision{Address: d.Address, Mask: x.mask, Value: x.value & x.mask})
		if at := bootDefault(acs, opt.IOMMU); v != at {
			boot = append(boot, Setting{Device: d, Control: at, Planned: v})
		}
		if v == acs.Control {
			continue
		}
		p.Actions = append(p.Actions, Action{
			Device: d, CapOffset: acs.Offset, Control: acs.Control, Planned: v, Mask: x.mask,
			Setpci: Setpci(d.Address, x.mask, v), Why: x.why, Pairs: x.pairs, IOMMUGroups: groupsBelow(t, d),
		})
	}
	p.Boot = NewBootParam(opt.Kernel, boot)
	return planned
}

// bootDefault is ACS Control as the kernel leaves it at boot without a parameter:
// with an IOMMU, pci_std_enable_acs() (drivers/pci/pci.c) adds the SV, RR, CR and UF
// the capability offers to what the firmware left, which is taken to be the value
// read less a change made since; without one, the firmware's value, the value read.
func bootDefault(acs *pcie.ACS, iommu bool) uint16 {
	if !iommu {
		return acs.Control
	}
	return acs.Control | acs.Capability&iommugroup.ReqACSFlags
}

// predict fills Pair.Predicted: the verdicts on t with the planned values.
func (p *Plan) predict(t *pcie.Topology, plat p2pdma.Platform, planned map[pcie.Address]uint16) {
	after := t.WithACSControl(planned)
	if after == t {
		for i := range p.Pairs {
			p.Pairs[i].Predicted = p.Pairs[i].Before
		}
		return
	}
	calc := p2pdma.NewCalculator(after, plat)
	for i := range p.Pairs {
		p.Pairs[i].Predicted = calc.Calc(after.Device(p.Pairs[i].Provider.Address), after.Device(p.Pairs[i].Client.Address))
	}
}

// groups predicts the IOMMU groups after a reboot with the boot parameter: every ACS
// function at the kernel's boot value, those the parameter names at the value it
// gives them.
func (p *Plan) groups(t *pcie.Topology, opt Options) {
	if !opt.IOMMU {
		return
	}
	p.GroupsDiffer = iommugroup.Check(t, iommugroup.Predict(t))
	if !p.Boot.Usable() {
		return
	}
	boot := map[pcie.Address]uint16{}
	for _, d := range t.Devices {
		if acs, _ := d.ACS(); acs != nil {
			boot[d.Address] = bootDefault(acs, true)
		}
	}
	for _, s := range p.Boot.Boot {
		boot[s.Device.Address] = s.Planned
	}
	g := iommugroup.Predict(t.WithACSControl(boot))
	p.GroupsAfter = &g
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

func dedupe(s []string) []string {
	var out []string
	for _, x := range s {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
