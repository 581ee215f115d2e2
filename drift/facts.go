package drift

import (
	"fmt"
	"slices"
	"strings"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/internal/bytesize"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/procfs"
	"github.com/p2pkit/p2pkit/sysfs"
)

// Names of the device facts.
const (
	factID      = "IDs"
	factType    = "port type"
	factDriver  = "driver"
	factLink    = "link"
	factLinkMax = "link capability"
	factACS     = "ACS Control"
	factNUMA    = "NUMA node"
	factGroup   = FactIOMMUGroup
	factDomain  = "IOMMU domain"
	factVFs     = "VFs"
	factNVLinks = "NVLinks"
)

// FactIOMMUGroup is the fact of a device's IOMMU group: its size and the
// devices of interest in it, as Change values say it ("6 functions with GPU0,
// NIC0").
const FactIOMMUGroup = "IOMMU group"

// factCheckPrefix begins the name of a check's status among the node facts.
const factCheckPrefix = "check "

// known and unknown make facts.
func known(k Kind, name, value string) Fact {
	return Fact{Kind: k, Name: name, Value: value, Known: true}
}
func unknown(k Kind, name, why string) Fact { return Fact{Kind: k, Name: name, Value: why} }

// deviceFacts lists what is compared of one function.
func deviceFacts(n *node.Node, d *pcie.Device, interesting bool, lk *lookups) []Fact {
	fs := []Fact{known(Versions, factID, idText(d)), known(Versions, factDriver, orNone(d.Driver))}
	if pt, ok := d.PortType(); ok {
		fs = append(fs, known(Devices, factType, pt.String()))
	} else if d.Config == nil || !d.Config.CapsKnown {
		fs = append(fs, unknown(Devices, factType, "the capability list was not read"))
	}
	fs = append(fs, linkFacts(d)...)
	fs = append(fs, acsFact(d)...)
	fs = append(fs, barFacts(d)...)
	if len(d.VFs) > 0 || d.SRIOV != nil {
		fs = append(fs, known(Devices, factVFs, itoa(len(d.VFs))))
	}
	if interesting || (d.IsBridge() && d.Parent == nil) {
		if d.NUMANode == nil {
			fs = append(fs, unknown(NUMA, factNUMA, "numa_node not read"))
		} else {
			fs = append(fs, known(NUMA, factNUMA, itoa(*d.NUMANode)))
		}
	}
	if interesting {
		fs = append(fs, iommuFacts(d, lk)...)
	}
	if d.IsGPU() {
		fs = append(fs, nvlinkFact(n, d, lk))
	}
	return fs
}

// idText is the IDs firmware shows: vendor:device, subsystem and revision, as
// lspci -nn -vmm prints them.
func idText(d *pcie.Device) string {
	return fmt.Sprintf("%04x:%04x subsystem %04x:%04x rev %02x class %06x",
		d.Vendor, d.Device, d.SubVendor, d.SubDevice, d.Revision, d.Class)
}

// linkFacts are the link toward the parent: an endpoint's or an upstream port's.
// Root and downstream ports report the link below them, the one their child
// reports, so theirs is left out.
func linkFacts(d *pcie.Device) []Fact {
	pt, ok := d.PortType()
	switch {
	case ok && (pt == pcie.PortRootPort || pt == pcie.PortDownstream):
		return nil
	case !ok && d.IsBridge():
		why := "the port type was not read: whether the link is its own is unknown"
		return []Fact{unknown(Link, factLink, why), unknown(Link, factLinkMax, why)}
	}
	if c := d.Config; c != nil && c.CapsKnown && (c.Express == nil || !c.Express.HasLink) {
		return nil // conventional PCI, or an RCiEP: no link
	}
	l := d.Link()
	if !l.Current.Known() {
		return []Fact{unknown(Link, factLink, "the link status was not read"), unknown(Link, factLinkMax, "the link status was not read")}
	}
	cur := l.Current.String()
	if down, ok := d.LinkDowngraded(); ok && down {
		cur += " (downgraded)"
	}
	if !l.Max.Known() {
		return []Fact{known(Link, factLink, cur), unknown(Link, factLinkMax, "the link capability was not read")}
	}
	return []Fact{known(Link, factLink, cur), known(Link, factLinkMax, l.Max.String())}
}

// acsFact is ACS Control as lspci -vvv prints its ACSCtl line.
func acsFact(d *pcie.Device) []Fact {
	acs, ok := d.ACS()
	switch {
	case !ok:
		return []Fact{unknown(ACS, factACS, "extended configuration space was not read (it needs root)")}
	case acs == nil:
		return nil
	}
	return []Fact{known(ACS, factACS, pcie.ACSString(acs.Control))}
}

// barFacts are the sizes of the memory BARs and the current sizes of the
// Resizable BARs.
func barFacts(d *pcie.Device) []Fact {
	var out []Fact
	for _, r := range d.BARs() {
		if r.IsMem() {
			out = append(out, known(BAR, barName(d, r.Index), bytesize.Format(r.Size())))
		}
	}
	for _, i := range d.ResourcesUnread {
		if i <= 5 {
			out = append(out, unknown(BAR, barName(d, i), "its resource line did not parse"))
		}
	}
	if d.Config != nil && d.Config.ExtCapsKnown {
		for _, r := range d.Config.ReBAR {
			out = append(out, known(BAR, rebarName(r.BAR), bytesize.Format(r.Current)))
		}
		return out
	}
	if d.Config != nil && d.Config.CapsKnown && d.Config.Express == nil {
		return out // conventional PCI: no extended capabilities
	}
	for _, r := range d.BARs() { // any memory BAR may be resizable
		if r.IsMem() {
			out = append(out, unknown(BAR, rebarName(r.Index), "extended configuration space was not read (it needs root)"))
		}
	}
	return out
}

func rebarName(i int) string { return fmt.Sprintf("Resizable BAR %d", i) }

// barName names a BAR "BAR 2" as its index, and adds "(BAR1)" to the one NVIDIA
// calls BAR1 on a GPU.
func barName(d *pcie.Device, i int) string {
	name := fmt.Sprintf("BAR %d", i)
	if d.IsGPU() {
		if b, ok := check.BAR1(d); ok && b.Index == i {
			name += " (BAR1)"
		}
	}
	return name
}

// lookups index what deviceFacts looks up per device: IOMMU group labels
// (groupLabels) and types, and NVML's GPUs by address.
type lookups struct {
	groups map[int]string
	types  map[int]sysfs.IOMMUDomainType
	gpus   map[pcie.Address]*gpu.GPU
}

func newLookups(n *node.Node, groups map[int]string) *lookups {
	lk := &lookups{groups: groups, types: map[int]sysfs.IOMMUDomainType{}, gpus: map[pcie.Address]*gpu.GPU{}}
	for _, g := range n.Platform.IOMMUGroups {
		lk.types[g.ID] = g.Type
	}
	if n.GPU != nil {
		for i := range n.GPU.GPUs {
			if g := &n.GPU.GPUs[i]; g.Address != nil && lk.gpus[*g.Address] == nil {
				lk.gpus[*g.Address] = g
			}
		}
	}
	return lk
}

// iommuFacts are the device's IOMMU group, by membership, and its default
// domain type (/sys/kernel/iommu_groups/N/type).
func iommuFacts(d *pcie.Device, lk *lookups) []Fact {
	if d.IOMMUGroup == nil {
		return []Fact{known(IOMMU, factGroup, "none")}
	}
	g := *d.IOMMUGroup
	out := []Fact{known(IOMMU, factGroup, lk.groups[g])}
	t, ok := lk.types[g]
	switch {
	case !ok || t == sysfs.IOMMUNotRead:
		out = append(out, unknown(IOMMU, factDomain, "its group's type was not read"))
	case t == sysfs.IOMMUUnknown:
		out = append(out, unknown(IOMMU, factDomain, "the group type is unknown (Linux before 4.19 has no type file)"))
	default:
		out = append(out, known(IOMMU, factDomain, t.String()))
	}
	return out
}

// nvlinkFact is a GPU's number of active NVLinks, from NVML.
func nvlinkFact(n *node.Node, d *pcie.Device, lk *lookups) Fact {
	g := lk.gpus[d.Address]
	switch {
	case n.GPU == nil:
		return unknown(NVLink, factNVLinks, "no NVML facts")
	case g == nil:
		return unknown(NVLink, factNVLinks, "NVML does not list this GPU")
	case g.NVLink == nil:
		return unknown(NVLink, factNVLinks, "NVML gave no NVLink state")
	}
	return known(NVLink, factNVLinks, itoa(g.NVLink.Active))
}

// modulesOfInterest are the modules whose presence decides GPUDirect RDMA,
// GDRCopy and NVMe peer-to-peer.
var modulesOfInterest = []string{"nvidia", "nvidia_peermem", "nv_peer_mem", "gdrdrv", "ib_core", "mlx5_core", "mlx5_ib", "nvme"}

// nodeFacts lists what is compared of the node as a whole.
func nodeFacts(n *node.Node) []Fact {
	p := n.Platform
	var fs []Fact
	if p.Kernel != nil {
		fs = append(fs, known(Versions, "kernel", p.Kernel.Release))
	} else {
		fs = append(fs, unknown(Versions, "kernel", "/proc/version not read"))
	}
	if p.CPU != nil {
		fs = append(fs, known(Versions, "CPU", fmt.Sprintf("%s family %d model %d (%s)", orNone(p.CPU.VendorID), p.CPU.Family, p.CPU.Model, p.CPU.ModelName)))
	} else {
		fs = append(fs, unknown(Versions, "CPU", "/proc/cpuinfo not read"))
	}
	fs = append(fs, driverFacts(n)...)
	for _, m := range modulesOfInterest {
		name := "module " + m
		switch {
		case p.Modules == nil:
			fs = append(fs, unknown(Versions, name, "/proc/modules not read"))
		case p.Modules.Loaded(m):
			fs = append(fs, known(Versions, name, "loaded"))
		default:
			fs = append(fs, known(Versions, name, "not loaded"))
		}
	}
	if v := p.KernelConfig.Value("CONFIG_PCI_P2PDMA"); v == procfs.ConfigUnknown {
		fs = append(fs, unknown(Versions, "CONFIG_PCI_P2PDMA", "no kernel configuration found"))
	} else {
		fs = append(fs, known(Versions, "CONFIG_PCI_P2PDMA", v.String()))
	}
	fs = append(fs, bootFacts(p.Cmdline)...)
	fs = append(fs, iommuMode(n))
	fs = append(fs, checkFacts(n)...)
	return fs
}

// driverFacts are the NVIDIA driver's version from /proc and NVML's.
func driverFacts(n *node.Node) []Fact {
	var fs []Fact
	if v := n.Platform.NVIDIA; v != nil {
		flavour := "proprietary"
		if v.Open {
			flavour = "open"
		}
		fs = append(fs, known(Versions, "NVIDIA driver", v.Version+" "+flavour))
	} else {
		fs = append(fs, known(Versions, "NVIDIA driver", "not loaded"))
	}
	if n.GPU == nil {
		return append(fs, unknown(Versions, "CUDA (NVML)", "no NVML facts"))
	}
	cuda := "unknown"
	if c := n.GPU.CUDADriverVersion; c > 0 {
		cuda = fmt.Sprintf("%d.%d", c/1000, c%1000/10)
	}
	return append(fs, known(Versions, "CUDA (NVML)", cuda))
}

// bootFacts are the kernel parameters that change IOMMU and ACS, as written on
// the command line (Documentation/admin-guide/kernel-parameters.txt): the rest
// of the line (root=UUID, BOOT_IMAGE) never counts.
func bootFacts(c *procfs.Cmdline) []Fact {
	if c == nil {
		return []Fact{unknown(IOMMU, "IOMMU parameters", "/proc/cmdline not read"),
			unknown(ACS, "ACS parameters", "/proc/cmdline not read")}
	}
	var iommu, acs []string
	for _, p := range c.Params {
		text := p.Name
		if p.HasValue {
			text += "=" + p.Value
		}
		switch {
		case p.Name == "iommu" || p.Name == "intel_iommu" || p.Name == "amd_iommu" || strings.HasPrefix(p.Name, "iommu."):
			iommu = append(iommu, text)
		case p.Name == "pcie_acs_override":
			acs = append(acs, text)
		case p.Name == "pci":
			for _, o := range strings.Split(p.Value, ",") {
				if strings.HasPrefix(o, "disable_acs_redir=") || strings.HasPrefix(o, "config_acs=") {
					acs = append(acs, "pci="+o)
				}
			}
		}
	}
	return []Fact{known(IOMMU, "IOMMU parameters", joinOrNone(iommu)), known(ACS, "ACS parameters", joinOrNone(acs))}
}

// iommuMode is the set of default domain types of the groups of the devices of
// interest: "off" without IOMMU groups.
func iommuMode(n *node.Node) Fact {
	p := n.Platform
	if p.IOMMUGroups == nil {
		return known(IOMMU, "IOMMU mode", "off (no IOMMU groups)")
	}
	types := map[int]sysfs.IOMMUDomainType{}
	for _, g := range p.IOMMUGroups {
		types[g.ID] = g.Type
	}
	var seen []string
	for _, d := range n.Interesting() {
		if d.IOMMUGroup == nil {
			continue
		}
		if s := types[*d.IOMMUGroup].String(); !slices.Contains(seen, s) {
			seen = append(seen, s)
		}
	}
	slices.Sort(seen)
	return known(IOMMU, "IOMMU mode", joinOrNone(seen))
}

// checkFacts are the statuses of the node report's checks, judged as on a
// snapshot on both sides of a comparison: the checks that judge a process (its
// memlock limit, its NCCL environment) or a probe skip, so that a live node and
// its golden snapshot are judged alike. An unknown status is a fact not read.
func checkFacts(n *node.Node) []Fact {
	in := check.Inputs{Source: check.Snapshot}
	if n.GPU == nil {
		in.NoNVML = "no NVML facts"
	}
	results, err := check.Run(check.NewFacts(n, in), nil)
	if err != nil {
		return []Fact{unknown(Checks, factCheckPrefix+"catalogue", err.Error())}
	}
	var fs []Fact
	for _, r := range results {
		name := factCheckPrefix + r.ID
		if r.Status == check.Unknown {
			fs = append(fs, unknown(Checks, name, "unknown: "+r.Summary))
			continue
		}
		fs = append(fs, known(Checks, name, string(r.Status)))
	}
	return fs
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func joinOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, " ")
}
