package drift

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/p2pkit/p2pkit/matrix"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pathclass"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/provision"
)

// Kind is a kind of drift, named by the part of the fabric it is about.
type Kind string

// The kinds, in the order reports list them: the facts first, then the verdicts
// drawn from them.
const (
	// Devices: functions missing or added (by role), port types, SR-IOV VF counts.
	Devices Kind = "devices"
	// Link: PCIe link speed and width, and downgrades (lspci's "(downgraded)").
	Link Kind = "link"
	// ACS: ACS Control, and the boot parameters that change it.
	ACS Kind = "acs"
	// BAR: memory BAR sizes and Resizable BAR sizes.
	BAR Kind = "bar"
	// IOMMU: the IOMMU mode, each device's domain type and group membership, and
	// the IOMMU boot parameters.
	IOMMU Kind = "iommu"
	// NUMA: the NUMA node of each device of interest and root port.
	NUMA Kind = "numa"
	// NVLink: active NVLinks per GPU and between GPUs (NVML).
	NVLink Kind = "nvlink"
	// Versions: kernel, CPU, drivers and modules, and what firmware shows of each
	// function (its IDs, subsystem and revision).
	Versions Kind = "versions"
	// Pairs: the kernel's P2PDMA verdict, the path classes and NCCL's transport of
	// every ordered pair of devices of interest.
	Pairs Kind = "pairs"
	// Checks: the status of each check of the node report.
	Checks Kind = "checks"
)

// Kinds returns every kind in report order.
func Kinds() []Kind {
	return []Kind{Devices, Link, ACS, BAR, IOMMU, NUMA, NVLink, Versions, Pairs, Checks}
}

// Fact is one compared fact: of a device (Device.Facts) or of the whole node
// (Summary.Facts).
type Fact struct {
	Kind Kind
	// Name says what it is ("link", "ACS Control", "BAR 2", "kernel"); it is
	// unique among the facts of one device, and of the node.
	Name string
	// Value is the fact in the words p2pcheck prints elsewhere (lspci's for what
	// lspci shows).
	Value string
	// Known is false when the fact could not be read; Value then says why.
	Known bool
}

// Role is what a device is in the fabric.
type Role string

// The roles.
const (
	RoleGPU         Role = "gpu"
	RoleNIC         Role = "nic"
	RoleRDMANIC     Role = "rdma-nic" // a NIC with an RDMA device (infiniband/)
	RoleNVMe        Role = "nvme"
	RoleAccelerator Role = "accelerator"
	RoleP2PMem      Role = "p2pmem"
	RoleSwitch      Role = "switch" // a switch's upstream port
	RoleSwitchPort  Role = "switch-port"
	RoleRootPort    Role = "root-port"
	RoleBridge      Role = "bridge"
	RoleOther       Role = "other"
)

// Device is one function (VFs excepted) and its facts.
type Device struct {
	Place string
	Role  Role
	// Address and Label (GPU0, NIC1: matrix.Label's) are for display only:
	// neither is compared nor in the signature.
	Address pcie.Address
	Label   string
	// Parent is the index in Summary.Devices of the bridge above, -1 on a root bus.
	Parent int
	Facts  []Fact
	// interest is the index among Summary.Interest, -1 for other devices.
	interest int
}

// Fact returns the fact of d named name, or false.
func (d *Device) Fact(name string) (Fact, bool) {
	for _, f := range d.Facts {
		if f.Name == name {
			return f, true
		}
	}
	return Fact{}, false
}

// Of reports whether the device is a device of interest (one of the pairs).
func (d *Device) Of() bool { return d.interest >= 0 }

// Summary is what is compared of one machine.
type Summary struct {
	// Devices in place order.
	Devices []Device
	// Facts about the whole node, in name order.
	Facts []Fact
	// Interest holds the indices in Devices of the devices of interest
	// (matrix.RoleOf), in address order.
	Interest []int
	// PairsNote says why the pairs were not evaluated, or why NCCL's transport
	// was not predicted; empty when both were.
	PairsNote string
	// NCCL reports whether NCCL's transports were predicted, NVML whether NVML's
	// facts were known (asked live, or recorded in a snapshot).
	NCCL, NVML bool

	pairs      []pairFacts // len(Interest)², row-major
	transports []string    // NCCL transport texts, interned
	places     map[string]int
}

// pairFacts are the verdicts of one ordered pair.
type pairFacts struct {
	mapType   p2pdma.MapType
	distance  int32
	nvsmi     pathclass.Class
	nvlinks   uint16
	nccl      pathclass.Class
	transport uint32 // index+1 in Summary.transports; 0: none
}

// maxPairDevices bounds the devices of interest whose pairs are evaluated: their
// square is what a Summary holds, about 16 MB at the bound.
const maxPairDevices = 1024

// Summarize reduces a loaded machine to its Summary. It reads nothing: the node
// holds what was read, NVML's facts included when they were asked for or recorded.
func Summarize(n *node.Node) *Summary {
	s := &Summary{places: map[string]int{}, NVML: n.GPU != nil}
	t := n.Topology
	labels := map[*pcie.Device]matrix.Entry{}
	for _, e := range matrix.Label(t.Devices) {
		labels[e.Device] = e
	}
	roles := switchRoles(t)
	var devs []*pcie.Device
	for _, d := range t.Devices {
		if !d.IsVF() {
			devs = append(devs, d)
		}
	}
	placeOf := map[*pcie.Device]string{}
	for _, d := range devs {
		p := provision.DeviceSpec(d)
		if _, dup := s.places[p]; dup {
			p += "@" + d.Address.String() // only a corrupt tree repeats a place
		}
		s.places[p] = -1
		placeOf[d] = p
	}
	slices.SortFunc(devs, func(a, b *pcie.Device) int { return cmp.Compare(placeOf[a], placeOf[b]) })
	index := map[*pcie.Device]int{}
	for i, d := range devs {
		index[d] = i
		s.places[placeOf[d]] = i
	}
	lk := newLookups(n, groupLabels(devs, placeOf))
	for _, d := range devs {
		e, interesting := labels[d]
		dev := Device{Place: placeOf[d], Role: roleOf(d, e, interesting, roles), Address: d.Address,
			Label: e.Label, Parent: -1, interest: -1}
		if p, ok := index[d.Parent]; ok {
			dev.Parent = p
		}
		dev.Facts = deviceFacts(n, d, interesting, lk)
		s.Devices = append(s.Devices, dev)
	}
	for _, e := range matrix.Label(t.Devices) {
		i := index[e.Device]
		s.Devices[i].interest = len(s.Interest)
		s.Interest = append(s.Interest, i)
	}
	s.Facts = nodeFacts(n)
	s.summarizePairs(n, devs)
	slices.SortFunc(s.Facts, func(a, b Fact) int { return cmp.Compare(a.Name, b.Name) })
	return s
}

// Device returns the device at place, or nil.
func (s *Summary) Device(place string) *Device {
	if i, ok := s.places[place]; ok && i >= 0 {
		return &s.Devices[i]
	}
	return nil
}

// Fact returns the node-wide fact named name, or false.
func (s *Summary) Fact(name string) (Fact, bool) {
	i, ok := slices.BinarySearchFunc(s.Facts, name, func(f Fact, n string) int { return cmp.Compare(f.Name, n) })
	if !ok {
		return Fact{}, false
	}
	return s.Facts[i], true
}

// switchRoles marks the upstream and downstream ports of the topology's switches.
func switchRoles(t *pcie.Topology) map[*pcie.Device]Role {
	r := map[*pcie.Device]Role{}
	for _, sw := range t.Switches {
		r[sw.Upstream] = RoleSwitch
		for _, d := range sw.Downstream {
			r[d] = RoleSwitchPort
		}
	}
	return r
}

func roleOf(d *pcie.Device, e matrix.Entry, interesting bool, switches map[*pcie.Device]Role) Role {
	if interesting {
		switch e.Role {
		case matrix.GPU:
			return RoleGPU
		case matrix.NIC:
			if len(d.RDMADevs) > 0 {
				return RoleRDMANIC
			}
			return RoleNIC
		case matrix.NVMe:
			return RoleNVMe
		case matrix.Accelerator:
			return RoleAccelerator
		case matrix.P2PMem:
			return RoleP2PMem
		}
	}
	if r, ok := switches[d]; ok {
		return r
	}
	if d.IsBridge() {
		if pt, ok := d.PortType(); (ok && pt == pcie.PortRootPort) || (!ok && d.Parent == nil) {
			return RoleRootPort
		}
		return RoleBridge
	}
	return RoleOther
}

// groupLabels names each IOMMU group by the first place among its functions and
// the number of functions in it, "0000:15:01.0/0.0/0.0 (4 functions)", so that
// group numbers, which the kernel hands out in discovery order, never count:
// only which functions share a group does.
func groupLabels(devs []*pcie.Device, placeOf map[*pcie.Device]string) map[int]string {
	first, size := map[int]string{}, map[int]int{}
	for _, d := range devs {
		if d.IOMMUGroup == nil {
			continue
		}
		g, p := *d.IOMMUGroup, placeOf[d]
		if old, ok := first[g]; !ok || p < old {
			first[g] = p
		}
		size[g]++
	}
	out := map[int]string{}
	for g, p := range first {
		out[g] = p + " (" + itoa(size[g]) + " functions)"
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }
