package vmtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/pcie"
)

// Facts are what the kernel decides for a function at boot, as opposed to what the
// catalogue builds: its ACS Control (the kernel's pci_enable_acs()), IOMMU group and
// NUMA node.
type Facts struct {
	ACS        string // ACS Control as 4 hex digits, "" without an ACS capability
	IOMMUGroup int    // -1 without a group
	NUMANode   int    // numa_node, -1 when the firmware gave none
}

// View is a guest's PCI functions, in address order, with their facts.
type View struct {
	Funcs []Func
	Facts map[pcie.Address]Facts
}

// portTypeWords name the PCI Express port types the catalogue uses.
var portTypeWords = map[pcie.PortType]string{
	pcie.PortEndpoint:   "endpoint",
	pcie.PortRootPort:   "root-port",
	pcie.PortUpstream:   "upstream",
	pcie.PortDownstream: "downstream",
	pcie.PortPCIeToPCI:  "pcie-to-pci",
}

func portWord(t pcie.PortType) string {
	if w, ok := portTypeWords[t]; ok {
		return w
	}
	return fmt.Sprintf("type-%d", t)
}

// ParsePCIDump parses the guest's busybox-only listing (CapturePCI, one line per
// function; see guestFuncs) into a View. It shares no code with sysfs or pcie's tree
// building, so it checks them independently.
func ParsePCIDump(b []byte) (View, error) {
	v := View{Facts: map[pcie.Address]Facts{}}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 10 {
			return v, fmt.Errorf("vmtest: pci dump: %d fields in %q", len(f), line)
		}
		kv := map[string]string{}
		for _, x := range f[3:] {
			k, val, ok := strings.Cut(x, "=")
			if !ok {
				return v, fmt.Errorf("vmtest: pci dump: bad field %q in %q", x, line)
			}
			kv[k] = val
		}
		addr, err := pcie.ParseAddress(f[0])
		if err != nil {
			return v, fmt.Errorf("vmtest: pci dump: %w", err)
		}
		elems := strings.Split(f[1], "/")
		if len(elems) < 2 || !strings.HasPrefix(elems[0], "pci") || elems[len(elems)-1] != f[0] {
			return v, fmt.Errorf("vmtest: pci dump: path %q does not end in %s", f[1], f[0])
		}
		fn := Func{Addr: addr, HostBridge: elems[0], ID: f[2], Type: "pci"}
		if len(elems) > 2 {
			fn.Parent = elems[len(elems)-2]
		}
		if t := kv["exp"]; t != "-" {
			n, err := strconv.Atoi(t)
			if err != nil {
				return v, fmt.Errorf("vmtest: pci dump: bad exp in %q", line)
			}
			fn.Type = portWord(pcie.PortType(n))
		}
		if hdr, err := strconv.ParseUint(kv["hdr"], 16, 8); err != nil {
			return v, fmt.Errorf("vmtest: pci dump: bad hdr in %q", line)
		} else if hdr&0x7f == 1 {
			bus := kv["bus"] // primary, secondary, subordinate: 6 hex digits
			if len(bus) != 6 {
				return v, fmt.Errorf("vmtest: pci dump: bad bus in %q", line)
			}
			fn.Bus = bus[2:4] + "-" + bus[4:6]
		}
		if pf := kv["physfn"]; pf != "-" {
			fn.PhysFn = pf
		}
		facts := Facts{IOMMUGroup: -1}
		if a := kv["acs"]; a != "-" {
			facts.ACS = a
		}
		if g := kv["group"]; g != "-" {
			if facts.IOMMUGroup, err = strconv.Atoi(g); err != nil {
				return v, fmt.Errorf("vmtest: pci dump: bad group in %q", line)
			}
		}
		if facts.NUMANode, err = strconv.Atoi(kv["numa"]); err != nil {
			return v, fmt.Errorf("vmtest: pci dump: bad numa in %q", line)
		}
		v.Funcs = append(v.Funcs, fn)
		v.Facts[addr] = facts
	}
	if err := sc.Err(); err != nil {
		return v, fmt.Errorf("vmtest: pci dump: %w", err)
	}
	slices.SortFunc(v.Funcs, func(a, b Func) int { return a.Addr.Compare(b.Addr) })
	return v, nil
}

// ViewOf is the same View built from a pcie.Topology (p2pcheck's own model of a
// snapshot). Functions whose configuration space could not be decoded get the port
// type "unknown", which never equals an expectation.
func ViewOf(t *pcie.Topology) View {
	v := View{Facts: map[pcie.Address]Facts{}}
	for _, d := range t.Devices {
		fn := Func{Addr: d.Address, ID: fmt.Sprintf("%04x:%04x", d.Vendor, d.Device), Type: "unknown"}
		if d.HostBridge != nil {
			fn.HostBridge = d.HostBridge.Name
		}
		if d.Parent != nil {
			fn.Parent = d.Parent.Address.String()
		}
		if d.PhysFn != nil {
			fn.PhysFn = d.PhysFn.String()
		}
		facts := Facts{IOMMUGroup: -1, NUMANode: -1}
		if d.Config != nil {
			fn.Type = "pci"
			if pt, ok := d.PortType(); ok {
				fn.Type = portWord(pt)
			}
			if d.Config.HeaderType == 1 {
				fn.Bus = fmt.Sprintf("%02x-%02x", d.Config.SecondaryBus, d.Config.SubordinateBus)
			}
			if d.Config.ACS != nil {
				facts.ACS = fmt.Sprintf("%04x", d.Config.ACS.Control)
			}
		}
		if d.IOMMUGroup != nil {
			facts.IOMMUGroup = *d.IOMMUGroup
		}
		if d.NUMANode != nil {
			facts.NUMANode = *d.NUMANode
		}
		v.Funcs = append(v.Funcs, fn)
		v.Facts[d.Address] = facts
	}
	slices.SortFunc(v.Funcs, func(a, b Func) int { return a.Addr.Compare(b.Addr) })
	return v
}

// DiffFuncs lists the differences between two function lists, keyed by address: a
// function only in want, only in got, or with different fields. It returns nil when
// they are equal.
func DiffFuncs(want, got []Func) []string {
	var diffs []string
	g := map[pcie.Address]Func{}
	for _, f := range got {
		g[f.Addr] = f
	}
	seen := map[pcie.Address]bool{}
	for _, w := range want {
		seen[w.Addr] = true
		f, ok := g[w.Addr]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("missing %s", fmtFunc(w)))
		case f != w:
			diffs = append(diffs, fmt.Sprintf("%s: want %s, got %s", w.Addr, fmtFunc(w), fmtFunc(f)))
		}
	}
	for _, f := range got {
		if !seen[f.Addr] {
			diffs = append(diffs, fmt.Sprintf("unexpected %s", fmtFunc(f)))
		}
	}
	return diffs
}

func fmtFunc(f Func) string {
	s := fmt.Sprintf("%s %s %s %s parent=%q", f.Addr, f.HostBridge, f.ID, f.Type, f.Parent)
	if f.Bus != "" {
		s += " bus=" + f.Bus
	}
	if f.PhysFn != "" {
		s += " physfn=" + f.PhysFn
	}
	return s
}

// Switch is a PCIe switch: its upstream port and its downstream ports, in address
// order.
type Switch struct {
	Upstream   string   `json:"upstream"`
	Downstream []string `json:"downstream"`
}

// topoJSON is the part of `p2pcheck topo --format json` the tier checks.
type topoJSON struct {
	Switches []Switch `json:"switches"`
	Devices  []struct {
		Address    string  `json:"address"`
		HostBridge string  `json:"host_bridge"`
		Parent     *string `json:"parent"`
		Vendor     string  `json:"vendor"`
		Device     string  `json:"device"`
		HeaderType *int    `json:"header_type"`
		BusNumbers *struct {
			Secondary   string `json:"secondary"`
			Subordinate string `json:"subordinate"`
		} `json:"bus_numbers"`
		PortType   *string `json:"port_type"`
		PhysFn     *string `json:"physfn"`
		NUMANode   *int    `json:"numa_node"`
		IOMMUGroup *int    `json:"iommu_group"`
		ACS        *struct {
			Known   bool   `json:"known"`
			Present bool   `json:"present"`
			Control string `json:"control"`
		} `json:"acs"`
	} `json:"devices"`
}

// ParseTopoJSON reads the output of `p2pcheck topo --format json` (p2pcheck's view of
// the live guest, not of a snapshot) into a View and its switches. Port types are
// pcie.PortType names ("Root Port"), null without a PCI Express capability; a device
// whose ACS state is not known gets ACS "unknown", which never equals a fact.
func ParseTopoJSON(b []byte) (View, []Switch, error) {
	var doc topoJSON
	if err := json.Unmarshal(b, &doc); err != nil {
		return View{}, nil, fmt.Errorf("vmtest: topo json: %w", err)
	}
	names := map[string]string{}
	for t, w := range portTypeWords {
		names[t.String()] = w
	}
	v := View{Facts: map[pcie.Address]Facts{}}
	for _, d := range doc.Devices {
		addr, err := canonicalAddress(d.Address)
		if err != nil {
			return v, nil, fmt.Errorf("vmtest: topo json: %w", err)
		}
		f := Func{Addr: addr, HostBridge: d.HostBridge, ID: d.Vendor + ":" + d.Device, Type: "pci"}
		if d.Parent != nil {
			f.Parent = *d.Parent
		}
		if d.PortType != nil {
			if f.Type = names[*d.PortType]; f.Type == "" {
				f.Type = "unexpected " + *d.PortType
			}
		}
		if d.HeaderType != nil && *d.HeaderType == 1 {
			if d.BusNumbers == nil {
				return v, nil, fmt.Errorf("vmtest: topo json: bridge %s without bus_numbers", addr)
			}
			f.Bus = d.BusNumbers.Secondary + "-" + d.BusNumbers.Subordinate
		}
		if d.PhysFn != nil {
			f.PhysFn = *d.PhysFn
		}
		facts := Facts{IOMMUGroup: -1, NUMANode: -1}
		switch {
		case d.ACS == nil || !d.ACS.Known:
			facts.ACS = "unknown"
		case d.ACS.Present:
			facts.ACS = strings.TrimPrefix(d.ACS.Control, "0x")
		}
		if d.IOMMUGroup != nil {
			facts.IOMMUGroup = *d.IOMMUGroup
		}
		if d.NUMANode != nil {
			facts.NUMANode = *d.NUMANode
		}
		v.Funcs = append(v.Funcs, f)
		v.Facts[addr] = facts
	}
	slices.SortFunc(v.Funcs, func(a, b Func) int { return a.Addr.Compare(b.Addr) })
	for i := range doc.Switches {
		slices.Sort(doc.Switches[i].Downstream)
	}
	slices.SortFunc(doc.Switches, func(a, b Switch) int { return strings.Compare(a.Upstream, b.Upstream) })
	return v, doc.Switches, nil
}

// canonicalAddress parses s and insists on the canonical form DDDD:BB:DD.F that
// p2pcheck's JSON contract and the kernel's pci_name() use.
func canonicalAddress(s string) (pcie.Address, error) {
	a, err := pcie.ParseAddress(s)
	if err != nil {
		return a, err
	}
	if a.String() != s {
		return a, fmt.Errorf("address %q is not in canonical form %s", s, a)
	}
	return a, nil
}
