package vmtest

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/p2pkit/p2pkit/pcie"
)

// Kind is a QEMU device model the catalogue can place. Each kind has fixed IDs and a
// fixed PCI Express port type in QEMU 7.2+ (include/hw/pci/pci_ids.h and the device
// files).
type Kind int

// The device models. Every one enumerates without a guest driver.
const (
	RootPort   Kind = iota // pcie-root-port: 1b36:000c, root port, ACS capability
	Upstream               // x3130-upstream: 104c:8232, switch upstream port, no ACS
	Downstream             // xio3130-downstream: 104c:8233, switch downstream port, no ACS
	PCIBridge              // pcie-pci-bridge: 1b36:000e, PCIe-to-PCI bridge
	PXB                    // pxb-pcie: 1b36:000b on pcie.0, opens a new root bus (host bridge)
	NVMe                   // nvme: 1b36:0010, endpoint (a drive image is attached)
	E1000E                 // e1000e: 8086:10d3, endpoint
	E1000                  // e1000: 8086:100e, conventional PCI (no PCI Express capability)
	TestDev                // pci-testdev: 1b36:0005, conventional PCI
	VirtioNet              // virtio-net-pci: 1af4:1041 (modern, on a PCIe port), endpoint; ats=on adds ATS
)

type kindInfo struct {
	model    string // -device driver name
	id       string // vendor:device as the guest reads it
	port     string // port type as Func.Type spells it
	bridge   bool   // has a secondary bus
	chassis  bool   // takes chassis= and slot= (a PCIe slot)
	vfDevice string // vendor:device of its SR-IOV VFs, "" when it has none
}

var kinds = map[Kind]kindInfo{
	RootPort:   {"pcie-root-port", "1b36:000c", "root-port", true, true, ""},
	Upstream:   {"x3130-upstream", "104c:8232", "upstream", true, false, ""},
	Downstream: {"xio3130-downstream", "104c:8233", "downstream", true, true, ""},
	PCIBridge:  {"pcie-pci-bridge", "1b36:000e", "pcie-to-pci", true, false, ""},
	PXB:        {"pxb-pcie", "1b36:000b", "pci", false, false, ""},
	NVMe:       {"nvme", "1b36:0010", "endpoint", false, false, "1b36:0010"},
	E1000E:     {"e1000e", "8086:10d3", "endpoint", false, false, ""},
	E1000:      {"e1000", "8086:100e", "pci", false, false, ""},
	TestDev:    {"pci-testdev", "1b36:0005", "pci", false, false, ""},
	VirtioNet:  {"virtio-net-pci", "1af4:1041", "endpoint", false, false, ""},
}

// Node is one emulated function in a topology, with the functions on its secondary
// bus (bridges) or on the root bus it opens (PXB).
type Node struct {
	Kind     Kind
	Slot     uint8    // device number on the parent bus
	Func     uint8    // function number; functions of one slot make a multifunction device
	Props    []string // extra -device properties, e.g. "cmb_size_mb=64"
	Children []*Node

	// BusNr and NUMANode are for PXB: the root bus number it opens (pxb-pcie bus_nr)
	// and its NUMA node (numa_node, -1 for none).
	BusNr    uint8
	NUMANode int

	// Subsys puts an NVMe into an nvme-subsys of that id (which SR-IOV needs). Such a
	// controller gets no namespace: QEMU refuses a legacy drive in a subsystem.
	Subsys string

	// VFs is the number of SR-IOV virtual functions the guest enables on this
	// function (echo N > sriov_numvfs) before the captures are taken.
	VFs int

	// ACSOn overrides the Topology's ACS Control expectation for this root port on
	// the kernels it names (by Kernel.Name), e.g. one named by
	// pci=disable_acs_redir=.
	ACSOn map[string]uint16
}

// Func is one PCI function as a topology check sees it: what the catalogue entry
// expects, and what a guest capture shows, in the same form so that they compare with
// ==. Port types are the words of Kind's table ("root-port", "upstream",
// "downstream", "pcie-to-pci", "endpoint") and "pci" for a function without a PCI
// Express capability.
type Func struct {
	Addr       pcie.Address
	HostBridge string // "pci0000:00"
	Parent     string // address of the bridge above, "" on a root bus
	ID         string // "vendor:device"
	Type       string
	// Bus is "secondary-subordinate" of a bridge ("02-04"), "" for other functions.
	Bus    string
	PhysFn string // address of the PF for a VF, ""
}

// Topology is one catalogue entry: a q35 machine, its kernel command line additions,
// and the PCI tree the entry builds. The tree is the single source of both the QEMU
// command line and the expected guest view (Want).
type Topology struct {
	Name string
	Doc  string // what the entry covers, one line

	CPU    string   // -cpu model
	Append []string // kernel parameters beyond the harness's own
	IOMMU  bool     // add intel-iommu (intremap=on, kernel-irqchip=split) and intel_iommu=on
	// DeviceIOTLB gives the intel-iommu device-IOTLB support (device-iotlb=on), which
	// QEMU needs to let a device's ATS translate.
	DeviceIOTLB bool
	// OnlyOn names the one kernel (Kernel.Name) the entry is for; "" is every kernel.
	OnlyOn string
	// NUMANodes splits memory and CPUs into this many NUMA nodes (0: no -numa).
	NUMANodes int

	// Root holds the functions on pcie.0 besides QEMU's built-in ones.
	Root []*Node

	// ACSControl is the ACS Control value every function with an ACS capability (the
	// root ports) must read after the kernel's pci_enable_acs(); ACSControlOn
	// overrides it for the kernels (by Kernel.Name) that differ.
	ACSControl   uint16
	ACSControlOn map[string]uint16
	// CPUP2P is what the oracle's cpu_supports_p2pdma must say (AMD Zen rule).
	CPUP2P bool
	// P2PMem names the CMB NVMe that provides p2pmem and the NVMe whose namespace is
	// the target of p2pmem's TestGuestRoundTrip; nil for no p2pmem proof.
	P2PMem *P2PMemProof
	// Fix runs the provisioning steps on the test kernel: `pairs --assume
	// acs-redirect=off`, `fix` (dry run), `fix --apply`, the oracle's rerun, then the
	// p2pmem proof (P2PMem), then `fix --apply` again (see the package documentation).
	Fix bool
	// Persisted boots the entry with the boot parameter `p2pcheck fix --persist`
	// writes for it (in Append): `p2pcheck fix` must then find nothing to do.
	Persisted bool
	// VirtHost runs the virtualization-host plan on the pairs among its functions
	// (see VirtHostProof).
	VirtHost *VirtHostProof
}

// VirtHostProof names the functions of `p2pcheck fix --virt-host --pairs`: a NIC with
// ATS and its peer on root ports of their own, and a NIC with ATS and its peer below
// one switch.
type VirtHostProof struct{ NIC, Peer, SwitchNIC, SwitchPeer *Node }

// P2PMemProof picks the two NVMe controllers of the in-guest p2pmem test.
type P2PMemProof struct{ Provider, Target *Node }

// builtin are the functions q35 always has on pcie.0 with -nodefaults -vga none:
// the MCH host bridge, the ICH9 LPC bridge, AHCI and SMBus controllers.
var builtin = []Func{
	{Addr: pcie.Address{}, ID: "8086:29c0", Type: "pci"},
	{Addr: pcie.Address{Device: 0x1f}, ID: "8086:2918", Type: "pci"},
	{Addr: pcie.Address{Device: 0x1f, Function: 2}, ID: "8086:2922", Type: "pci"},
	{Addr: pcie.Address{Device: 0x1f, Function: 3}, ID: "8086:2930", Type: "pci"},
}

// placed is a node with the guest address the firmware gives it.
type placed struct {
	n      *Node
	id     string // QEMU id
	addr   pcie.Address
	hb     string
	parent *placed
	qbus   string // the QEMU bus it plugs into: pcie.0, a bridge's or a PXB's id
	sec    uint8  // secondary bus of a bridge
	sub    uint8  // subordinate bus of a bridge
}

// layout places the tree without changing it. It assigns QEMU ids (model name and a
// counter) and the guest's bus numbers: SeaBIOS numbers each root bus's bridges depth
// first in devfn order (secondary = next free bus, subordinate = the last bus below),
// and Linux keeps that assignment.
func (t *Topology) layout() []*placed {
	var out []*placed
	counter := map[Kind]int{}
	var walk func(nodes []*Node, bus uint8, hb, qbus string, parent *placed, next *uint8)
	walk = func(nodes []*Node, bus uint8, hb, qbus string, parent *placed, next *uint8) {
		for _, n := range sortedNodes(nodes) {
			counter[n.Kind]++
			p := &placed{
				n:      n,
				id:     fmt.Sprintf("%s%d", strings.ReplaceAll(kinds[n.Kind].model, "-", ""), counter[n.Kind]),
				addr:   pcie.Address{Bus: bus, Device: n.Slot, Function: n.Func},
				hb:     hb,
				qbus:   qbus,
				parent: parent,
			}
			out = append(out, p)
			if kinds[n.Kind].bridge {
				*next++
				p.sec = *next
				walk(n.Children, p.sec, hb, p.id, p, next)
				p.sub = *next
			}
		}
	}
	var bus0 uint8
	walk(t.Root, 0, "pci0000:00", "pcie.0", nil, &bus0)
	// Expander bridges open their own root buses, numbered from bus_nr.
	for _, p := range slices.Clone(out) {
		if p.n.Kind == PXB {
			next := p.n.BusNr
			walk(p.n.Children, p.n.BusNr, fmt.Sprintf("pci0000:%02x", p.n.BusNr), p.id, nil, &next)
		}
	}
	return out
}

// sortedNodes returns nodes in devfn order, the order firmware scans a bus in.
func sortedNodes(nodes []*Node) []*Node {
	s := slices.Clone(nodes)
	slices.SortStableFunc(s, func(a, b *Node) int {
		return int(a.Slot)<<3 + int(a.Func) - (int(b.Slot)<<3 + int(b.Func))
	})
	return s
}

// Want is the guest view the entry must produce: q35's built-in functions plus every
// placed node and the VFs the guest enables, in address order.
func (t *Topology) Want() []Func {
	var fs []Func
	for _, b := range builtin {
		b.HostBridge = "pci0000:00"
		fs = append(fs, b)
	}
	for _, p := range t.layout() {
		k := kinds[p.n.Kind]
		f := Func{Addr: p.addr, HostBridge: p.hb, ID: k.id, Type: k.port}
		if p.parent != nil {
			f.Parent = p.parent.addr.String()
		}
		if k.bridge {
			f.Bus = fmt.Sprintf("%02x-%02x", p.sec, p.sub)
		}
		fs = append(fs, f)
		// QEMU's nvme puts VF i at devfn PF+1+i (NVME_VF_OFFSET 1, NVME_VF_STRIDE 1).
		for i := range p.n.VFs {
			vf := p.addr
			devfn := int(p.addr.DevFn()) + 1 + i
			vf.Device, vf.Function = uint8(devfn>>3), uint8(devfn&7)
			fs = append(fs, Func{Addr: vf, HostBridge: p.hb, Parent: f.Parent, ID: k.vfDevice,
				Type: "endpoint", PhysFn: p.addr.String()})
		}
	}
	slices.SortFunc(fs, func(a, b Func) int { return a.Addr.Compare(b.Addr) })
	return fs
}

// WantSwitches are the entry's switches: each x3130 upstream port with its
// downstream ports, ordered as ParseTopoJSON orders them.
func (t *Topology) WantSwitches() []Switch {
	var sw []Switch
	placedNodes := t.layout()
	for _, p := range placedNodes {
		if p.n.Kind != Upstream {
			continue
		}
		s := Switch{Upstream: p.addr.String()}
		for _, c := range placedNodes {
			if c.parent == p && c.n.Kind == Downstream {
				s.Downstream = append(s.Downstream, c.addr.String())
			}
		}
		slices.Sort(s.Downstream)
		sw = append(sw, s)
	}
	slices.SortFunc(sw, func(a, b Switch) int { return strings.Compare(a.Upstream, b.Upstream) })
	return sw
}

// Address returns the guest address of n, which must be part of t.
func (t *Topology) Address(n *Node) (pcie.Address, bool) {
	for _, p := range t.layout() {
		if p.n == n {
			return p.addr, true
		}
	}
	return pcie.Address{}, false
}

// QEMUArgs is the machine part of the QEMU command line: machine, CPU, memory and
// NUMA, IOMMU, and every -device (with -drive images created under dir by the
// caller, named after the device: see Drives).
func (t *Topology) QEMUArgs(dir string, memMiB, smp int) []string {
	machine := "q35"
	if t.IOMMU {
		machine += ",kernel-irqchip=split"
	}
	smp = max(smp, t.NUMANodes) // one CPU per node at least
	args := []string{"-machine", machine, "-accel", "tcg", "-cpu", t.CPU,
		"-m", fmt.Sprint(memMiB), "-smp", fmt.Sprint(smp)}
	if t.NUMANodes > 0 {
		per := memMiB / t.NUMANodes
		for i := range t.NUMANodes {
			args = append(args,
				"-object", fmt.Sprintf("memory-backend-ram,id=mem%d,size=%dM", i, per),
				"-numa", fmt.Sprintf("node,nodeid=%d,cpus=%d,memdev=mem%d", i, i%smp, i))
		}
	}
	if t.IOMMU {
		iommu := "intel-iommu,intremap=on"
		if t.DeviceIOTLB {
			iommu += ",device-iotlb=on"
		}
		args = append(args, "-device", iommu)
	}
	placedNodes := t.layout()
	subsys := map[string]bool{}
	for _, p := range placedNodes {
		if p.n.Subsys != "" && !subsys[p.n.Subsys] {
			subsys[p.n.Subsys] = true
			args = append(args, "-device", fmt.Sprintf("nvme-subsys,id=%s,nqn=p2pkit-%s", p.n.Subsys, p.n.Subsys))
		}
	}
	type slotKey struct {
		bus  string
		slot uint8
	}
	slots := map[slotKey]int{} // functions per slot: multifunction when > 1
	for _, p := range placedNodes {
		slots[slotKey{p.qbus, p.n.Slot}]++
	}
	chassis := 0
	for _, p := range placedNodes {
		k := kinds[p.n.Kind]
		dev := []string{k.model, "id=" + p.id, "bus=" + p.qbus,
			fmt.Sprintf("addr=%02x.%x", p.n.Slot, p.n.Func)}
		if p.n.Func == 0 && slots[slotKey{p.qbus, p.n.Slot}] > 1 {
			dev = append(dev, "multifunction=on")
		}
		if k.chassis {
			chassis++
			dev = append(dev, fmt.Sprintf("chassis=%d", chassis), "slot=0")
		}
		switch p.n.Kind {
		case PXB:
			dev = append(dev, fmt.Sprintf("bus_nr=%d", p.n.BusNr))
			if p.n.NUMANode >= 0 {
				dev = append(dev, fmt.Sprintf("numa_node=%d", p.n.NUMANode))
			}
		case NVMe:
			if p.n.Subsys != "" {
				dev = append(dev, "serial="+p.id, "subsys="+p.n.Subsys)
				break
			}
			args = append(args, "-drive", fmt.Sprintf("file=%s,if=none,id=drv-%s,format=raw",
				filepath.Join(dir, p.id+".img"), p.id))
			dev = append(dev, "serial="+p.id, "drive=drv-"+p.id)
		}
		dev = append(dev, p.n.Props...)
		args = append(args, "-device", strings.Join(dev, ","))
	}
	return args
}

// Drives lists the drive images QEMUArgs refers to, relative to its dir.
func (t *Topology) Drives() []string {
	var ds []string
	for _, p := range t.layout() {
		if p.n.Kind == NVMe && p.n.Subsys == "" {
			ds = append(ds, p.id+".img")
		}
	}
	return ds
}

// WantACS is the ACS Control the entry expects on k.
func (t *Topology) WantACS(k Kernel) uint16 {
	if v, ok := t.ACSControlOn[k.Name]; ok {
		return v
	}
	return t.ACSControl
}

// WantACSAt is the ACS Control the entry expects on k for the root port at a: its
// node's ACSOn for k, else WantACS.
func (t *Topology) WantACSAt(k Kernel, a pcie.Address) uint16 {
	for _, p := range t.layout() {
		if v, ok := p.n.ACSOn[k.Name]; ok && p.addr == a {
			return v
		}
	}
	return t.WantACS(k)
}

// pfStubGuestPath is where the initramfs holds Kernel.PFStub.
const pfStubGuestPath = "/lib/pci-pf-stub.ko"

// hasVFs reports whether the guest enables SR-IOV VFs.
func (t *Topology) hasVFs() bool {
	for _, p := range t.layout() {
		if p.n.VFs > 0 {
			return true
		}
	}
	return false
}

// Setup is the shell the guest runs on k before the captures: SR-IOV VFs. Writing
// sriov_numvfs needs a PF driver with sriov_configure (sriov_numvfs_store in
// drivers/pci/iov.c); where k has none built in, pci-pf-stub is loaded and bound to
// the PF alone through driver_override. VFs are not probed
// (sriov_drivers_autoprobe=0): QEMU's VF controllers stay offline, and no driver is
// needed to see them.
func (t *Topology) Setup(k Kernel) []string {
	var sh []string
	for _, p := range t.layout() {
		if p.n.VFs == 0 {
			continue
		}
		d := "/sys/bus/pci/devices/" + p.addr.String()
		if k.PFStub != "" {
			if len(sh) == 0 {
				sh = append(sh, "insmod "+pfStubGuestPath)
			}
			sh = append(sh,
				fmt.Sprintf("echo pci-pf-stub > %s/driver_override", d),
				fmt.Sprintf("echo %s > /sys/bus/pci/drivers_probe", p.addr))
		}
		sh = append(sh,
			fmt.Sprintf("echo 0 > %s/sriov_drivers_autoprobe", d),
			fmt.Sprintf("echo %d > %s/sriov_numvfs", p.n.VFs, d))
	}
	return sh
}
