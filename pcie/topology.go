package pcie

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Device is one PCI function in the tree.
type Device struct {
	Record

	// Config is the decoded configuration space, nil when none could be read or it
	// did not decode (the error is in Topology.Errors).
	Config *Config

	// Parent is the bridge whose secondary bus holds this function (the kernel's
	// dev->bus->self); nil on a root bus.
	Parent   *Device
	Children []*Device // functions on this bridge's secondary bus, in address order

	// HostBridge is the root complex above the function: the last pciDDDD:BB
	// element of its sysfs path (for an Intel VMD domain that is the VMD's own
	// bridge, not the one above the VMD endpoint). Nil when Path has none.
	HostBridge *HostBridge

	PF  *Device   // for a VF, its physical function
	VFs []*Device // for a PF, its virtual functions, in address order

	// PathIncomplete is set when a bridge named in Path between the host bridge and
	// this function is missing from the records. Parent is then the nearest bridge
	// of Path that is present (nil if none is), so walks and distances through this
	// function are shorter than on the machine; Topology.Errors says which is
	// missing. It is also set where NewTopology cut a parent loop that
	// inconsistent records made.
	PathIncomplete bool

	// BelowEndpoint is set when Parent is a function known to have no secondary
	// bus (a type-0 header: an endpoint, a VF, a host bridge function). The kernel
	// cannot build such a tree: it scans a bus below a bridge only
	// (drivers/pci/probe.c pci_scan_bridge_extend), so a corrupt or crafted tree
	// made it. The function is kept where its path puts it, Topology.Errors says
	// which endpoint has functions below it, and verdicts through the link are
	// not to be trusted.
	BelowEndpoint bool

	// Names from pci.ids; empty when no database was found.
	VendorName, DeviceName, ClassName, SubsystemName string

	depth int // len(Ancestors()): the number of Upstream() steps to a root bus
	role  portRole
}

// HostBridge is a root complex as sysfs shows it: /sys/devices/pciDDDD:BB.
type HostBridge struct {
	Name   string // "pci0000:00"
	Domain uint32
	Bus    uint8
	// Devices are the functions directly on the root bus, in devfn order.
	Devices []*Device
}

// Switch is a PCI Express switch: an upstream port and the downstream ports on its
// internal bus.
type Switch struct {
	Upstream   *Device
	Downstream []*Device // in address order
	// Inferred is set when some port's type could not be read (config space past
	// 64 bytes needs root) and the grouping was made from the tree's shape: below
	// a root-bus bridge or a downstream port, a bridge with bridges below it is
	// taken as an upstream port and those bridges as its downstream ports.
	Inferred bool
}

// Topology is the whole tree.
type Topology struct {
	HostBridges []*HostBridge // in domain, bus order (the name order)
	Devices     []*Device     // every function, in address order
	Switches    []*Switch     // in upstream-port address order
	// Errors lists per-device problems (the device is kept) and tree
	// inconsistencies, each a *DeviceError, in the order they were found.
	Errors []error

	byAddr map[Address]*Device
}

// NewTopology builds the tree from the records of every function.
//
// Each record's Config is decoded; a decode error is listed in Errors and the
// device kept with a nil Config, as is a record's own Err. Parents come from
// Record.Path: the last pciDDDD:BB element names the host bridge, the element before
// the function's own is its parent bridge, and a function right after the host
// bridge sits on the root bus. A record whose parent bridge is missing is kept,
// attached to the nearest bridge of its path that is present and marked
// PathIncomplete (see Device). A later duplicate of an address is dropped. VFs are
// joined to their PF through Record.PhysFn.
func NewTopology(recs []Record) *Topology {
	t := &Topology{byAddr: make(map[Address]*Device, len(recs))}
	devs := make([]Device, len(recs))
	t.Devices = make([]*Device, 0, len(recs))
	for i := range recs {
		d := &devs[i]
		d.Record = recs[i]
		if t.byAddr[d.Address] != nil {
			t.fail(d.Address, errors.New("duplicate record dropped"))
			continue
		}
		t.byAddr[d.Address] = d
		t.Devices = append(t.Devices, d)
		if d.Err != nil {
			t.fail(d.Address, d.Err)
		}
		if len(d.Record.Config) > 0 {
			c, err := ParseConfig(d.Record.Config)
			switch {
			case err != nil:
				t.fail(d.Address, err)
			case c.Vendor == 0xffff && d.PhysFn != nil:
				// A VF's ID registers read 0xffff; sysfs has the real IDs.
				c.Vendor, c.Device = d.Record.Vendor, d.Record.Device
				d.Config = c
			default:
				d.Config = c
			}
		}
	}
	slices.SortFunc(t.Devices, func(x, y *Device) int { return x.Address.Compare(y.Address) })

	hbs := make(map[string]*HostBridge)
	for _, d := range t.Devices {
		t.place(d, hbs)
	}
	for _, hb := range hbs {
		t.HostBridges = append(t.HostBridges, hb)
	}
	slices.SortFunc(t.HostBridges, func(x, y *HostBridge) int {
		return cmp.Or(cmp.Compare(x.Domain, y.Domain), cmp.Compare(x.Bus, y.Bus), strings.Compare(x.Name, y.Name))
	})
	for _, d := range t.Devices {
		if d.PhysFn == nil {
			continue
		}
		pf := t.byAddr[*d.PhysFn]
		switch pf {
		case nil:
			t.fail(d.Address, fmt.Errorf("physical function %s missing", d.PhysFn))
			continue
		case d:
			t.fail(d.Address, errors.New("names itself as its physical function"))
			continue
		}
		if pf.PhysFn != nil {
			// A PF is never a VF: the kernel links VFs only to a function with
			// the SR-IOV capability (drivers/pci/iov.c pci_iov_add_virtfn sets
			// virtfn->physfn to the PF), and a VF has none. A chain or a loop
			// of physfn links is a corrupt or hostile tree.
			t.fail(d.Address, fmt.Errorf("physical function %s is itself a virtual function", d.PhysFn))
			continue
		}
		d.PF = pf
		pf.VFs = append(pf.VFs, d)
	}
	t.breakCycles()
	t.markBelowEndpoints()
	t.fillDepths()
	t.findSwitches()
	return t
}

// DeviceError is a problem with one function, found while building a Topology;
// the function is kept. Every error in Topology.Errors is one.
type DeviceError struct {
	Address Address
	Err     error
}

// Error returns "pcie: ADDRESS: " and the message of Err, less a "pcie: " prefix of
// its own.
func (e *DeviceError) Error() string {
	return "pcie: " + e.Address.String() + ": " + strings.TrimPrefix(e.Err.Error(), "pcie: ")
}

// Unwrap returns Err.
func (e *DeviceError) Unwrap() error { return e.Err }

func (t *Topology) fail(a Address, err error) {
	t.Errors = append(t.Errors, &DeviceError{Address: a, Err: err})
}

// place sets d's host bridge and parent from its sysfs path and files it under them.
// Devices are placed in address order, so Children and HostBridge.Devices come out
// in address (devfn) order. It scans the path in place, allocating nothing per
// element, and reports at most one missing bridge and one bad element per device:
// the work is linear in the length of the path, however many elements it has.
func (t *Topology) place(d *Device, hbs map[string]*HostBridge) {
	p := strings.Trim(d.Path, "/")
	hbEnd := -1 // where the last pciDDDD:BB element ends
	var name string
	var dom uint32
	var bus uint8
	for start := 0; start <= len(p); {
		end := strings.IndexByte(p[start:], '/')
		if end < 0 {
			end = len(p)
		} else {
			end += start
		}
		if dd, bb, ok := parseHostBridgeName(p[start:end]); ok {
			hbEnd, name, dom, bus = end, p[start:end], dd, bb
		}
		start = end + 1
	}
	if hbEnd < 0 {
		t.fail(d.Address, fmt.Errorf("no host bridge in sysfs path %q", d.Path))
		return
	}
	chain := ""
	if hbEnd < len(p) {
		chain = p[hbEnd+1:]
	}
	above, own := "", chain
	if i := strings.LastIndexByte(chain, '/'); i >= 0 {
		above, own = chain[:i], chain[i+1:]
	}
	if own != d.Address.String() {
		t.fail(d.Address, fmt.Errorf("sysfs path %q does not end in the function's address", d.Path))
		return
	}
	hb := hbs[name]
	if hb == nil {
		hb = &HostBridge{Name: name, Domain: dom, Bus: bus}
		hbs[name] = hb
	}
	d.HostBridge = hb
	if above == "" {
		hb.Devices = append(hb.Devices, d)
		return
	}
	var missing, bad int
	var firstMissing Address
	var firstBad error
	for above != "" {
		el := above
		if i := strings.LastIndexByte(above, '/'); i >= 0 {
			el, above = above[i+1:], above[:i]
		} else {
			above = ""
		}
		a, err := ParseAddress(el)
		if err != nil {
			if bad == 0 {
				firstBad = err
			}
			bad++
			continue
		}
		if p := t.byAddr[a]; p != nil && p != d {
			d.Parent = p
			p.Children = append(p.Children, d)
			break
		}
		if missing == 0 {
			firstMissing = a
		}
		missing++
		d.PathIncomplete = true
	}
	if bad > 0 {
		t.fail(d.Address, fmt.Errorf("sysfs path %q: %w%s", d.Path, firstBad, andMore(bad)))
	}
	if missing > 0 {
		t.fail(d.Address, fmt.Errorf("bridge %s of its sysfs path is missing%s", firstMissing, andMore(missing)))
	}
}

// andMore says how many more problems of a kind there were after the first of n.
func andMore(n int) string {
	if n <= 1 {
		return ""
	}
	return fmt.Sprintf(" (and %d more above it)", n-1)
}

// parseHostBridgeName parses a host bridge directory name, pciDDDD:BB (the domain
// may have more digits, as Intel VMD's 10000 does).
func parseHostBridgeName(s string) (domain uint32, bus uint8, ok bool) {
	rest, ok := strings.CutPrefix(s, "pci")
	if !ok {
		return 0, 0, false
	}
	ds, bs, ok := strings.Cut(rest, ":")
	if !ok || len(ds) < 4 || len(ds) > 8 || len(bs) != 2 {
		return 0, 0, false
	}
	d, err := strconv.ParseUint(ds, 16, 32)
	if err != nil {
		return 0, 0, false
	}
	b, err := strconv.ParseUint(bs, 16, 8)
	if err != nil {
		return 0, 0, false
	}
	return uint32(d), uint8(b), true
}

// upstreamOwner returns the device whose Parent Upstream() uses: the PF for a VF.
func upstreamOwner(d *Device) *Device {
	if d.PF != nil {
		return d.PF
	}
	return d
}

// breakCycles cuts loops in the Upstream() relation, which only inconsistent
// records (two paths naming each other as parent) can make, so that every walk up
// ends.
func (t *Topology) breakCycles() {
	const (
		unseen = iota
		onWalk
		done
	)
	state := make(map[*Device]uint8, len(t.Devices))
	var walk []*Device
	for _, d := range t.Devices {
		walk = walk[:0]
		for x := d; x != nil && state[x] == unseen; x = x.Upstream() {
			state[x] = onWalk
			walk = append(walk, x)
			if u := x.Upstream(); u != nil && state[u] == onWalk {
				o := upstreamOwner(x)
				t.fail(o.Address, fmt.Errorf("parent %s closes a loop; cut", o.Parent.Address))
				o.Parent.Children = slices.DeleteFunc(o.Parent.Children, func(c *Device) bool { return c == o })
				o.Parent = nil
				o.PathIncomplete = true
			}
		}
		for _, x := range walk {
			state[x] = done
		}
	}
}

// markBelowEndpoints sets BelowEndpoint on every function whose parent is known to
// be no bridge, and reports each such parent once.
func (t *Topology) markBelowEndpoints() {
	for _, p := range t.Devices {
		if len(p.Children) == 0 || !p.knownEndpoint() {
			continue
		}
		for _, c := range p.Children {
			c.BelowEndpoint = true
		}
		t.fail(p.Address, fmt.Errorf("%d function(s) below it (the first %s), but it has a type-0 header and no "+
			"secondary bus: the kernel cannot build this tree, so verdicts through it are unknown", len(p.Children), p.Children[0].Address))
	}
}

// knownEndpoint reports whether d is known to have no secondary bus: its header
// type was read and is not a bridge's, or, without config space, its class is
// known and is not a bridge's.
func (d *Device) knownEndpoint() bool {
	if d.Config == nil && d.Class == 0 {
		return false // neither header nor class was read
	}
	return !d.IsBridge()
}

// fillDepths sets every device's depth, the length of its Upstream() chain, visiting
// each device once: work and memory are linear in the number of devices however deep
// the tree (a chain of N bridges would cost N²/2 if every device stored its chain).
// It runs after breakCycles, so every chain ends.
func (t *Topology) fillDepths() {
	for _, d := range t.Devices {
		d.depth = -1
	}
	var walk []*Device
	for _, d := range t.Devices {
		walk = walk[:0]
		x := d
		for x != nil && x.depth < 0 {
			walk = append(walk, x)
			x = x.Upstream()
		}
		n := -1 // the depth of x; a root bus is one step below nothing
		if x != nil {
			n = x.depth
		}
		for i := len(walk) - 1; i >= 0; i-- {
			n++
			walk[i].depth = n
		}
	}
}

// Ancestors returns the bridges above d, nearest first, as repeated Upstream()
// calls give them: a VF's chain starts at its PF's parent. Each call builds a new
// slice; [CommonUpstream] and [Topology.Path] walk the chain without one.
func (d *Device) Ancestors() []*Device {
	out := make([]*Device, 0, d.depth)
	for u := d.Upstream(); u != nil; u = u.Upstream() {
		out = append(out, u)
	}
	return out
}

// Depth returns the number of bridges above d, len(Ancestors()).
func (d *Device) Depth() int { return d.depth }

// CommonUpstream returns the nearest device that is a or one of a's ancestors and
// also b or one of b's ancestors, which is where the kernel's
// calc_map_type_and_dist() (drivers/pci/p2pdma.c) stops, and the number of
// Upstream() steps from a and from b to it. With no common device, common is nil and
// the steps are the whole chain lengths, len(Ancestors())+1, as the kernel counts
// them. It does not allocate, and its work is the length of the longer chain.
func CommonUpstream(a, b *Device) (common *Device, distA, distB int) {
	// A device shared by both chains is at the same depth in each: climb the
	// deeper chain to the other's depth, then both together until they meet.
	x, y := a, b
	for x.depth > y.depth {
		x, distA = x.Upstream(), distA+1
	}
	for y.depth > x.depth {
		y, distB = y.Upstream(), distB+1
	}
	for x != y {
		x, y = x.Upstream(), y.Upstream()
		distA, distB = distA+1, distB+1
	}
	if x == nil {
		return nil, a.depth + 1, b.depth + 1
	}
	return x, distA, distB
}
