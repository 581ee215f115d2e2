package pcie

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// rec builds a record whose address is the last element of its sysfs path.
func rec(p string, class uint32, config []byte) Record {
	a, err := ParseAddress(path.Base(p))
	if err != nil {
		panic(err)
	}
	return Record{Address: a, Path: p, Class: class, Config: config}
}

// bridgeCfg is a type-1 header with a PCI Express capability of type pt.
func bridgeCfg(pt PortType, sec, sub uint8, cur, max Link) []byte {
	c := newCfg(0x1b36, 0x000c, 0x060400, 0x01)
	c.b[offSecondaryBus], c.b[offSubordinate] = sec, sub
	c.cap(0x40, CapIDExpress, expressBody(pt, pt == PortRootPort || pt == PortDownstream, uint32(max.Speed), uint32(max.Width), 0, uint32(cur.Speed), uint32(cur.Width))...)
	c.ext(0x100, ExtCapIDACS, 1, append(le16(0x005f), le16(0x001d)...)...)
	return c.bytes(ConfigExpSize)
}

// endpointCfg is a type-0 header of class class with a PCI Express capability.
func endpointCfg(class uint32, cur, max Link) []byte {
	c := newCfg(0x10de, 0x2335, class, 0)
	c.cap(0x40, CapIDExpress, expressBody(PortEndpoint, false, uint32(max.Speed), uint32(max.Width), 0, uint32(cur.Speed), uint32(cur.Width))...)
	return c.bytes(ConfigExpSize)
}

// fixtureRecords is a two-socket machine:
//
//	pci0000:00  00:00.0 host bridge
//	            00:02.0 root port - 01:00.0 switch USP - 02:00.0 DSP - 03:00.0 NVMe
//	                                                   - 02:01.0 DSP - 04:00.0 GPU
//	            00:02.1 root port - 05:00.0 NIC PF, 05:00.2 and 05:00.3 its VFs
//	            00:0e.0 Intel VMD - pci10000:00 - 10000:00:01.0 root port - 10000:01:00.0 NVMe
//	pci0000:40  40:00.0 root port - 41:00.0 GPU
func fixtureRecords() []Record {
	g5x16, g4x16, g3x4, g4x4 := Link{5, 16}, Link{4, 16}, Link{3, 4}, Link{4, 4}
	hb := newCfg(0x8086, 0x29c0, 0x060000, 0).bytes(ConfigSize)
	pf := rec("pci0000:00/0000:00:02.1/0000:05:00.0", 0x020000, endpointCfg(0x020000, g4x16, g4x16))
	pf.VirtFns = []Address{{0, 5, 0, 2}, {0, 5, 0, 3}}
	vf := func(p string) Record {
		r := rec(p, 0x020000, nil)
		r.PhysFn = &pf.Address
		return r
	}
	nic := vf("pci0000:00/0000:00:02.1/0000:05:00.3")
	nic.CurrentLink = Link{Speed: 4} // sysfs knows the speed only
	recs := []Record{
		rec("pci0000:40/0000:40:00.0/0000:41:00.0", 0x030200, endpointCfg(0x030200, g5x16, g5x16)),
		rec("pci0000:00/0000:00:00.0", 0x060000, hb),
		rec("pci0000:00/0000:00:02.0", 0x060400, bridgeCfg(PortRootPort, 1, 4, g4x16, g5x16)),
		rec("pci0000:00/0000:00:02.0/0000:01:00.0", 0x060400, bridgeCfg(PortUpstream, 2, 4, g4x16, g5x16)),
		rec("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:00.0", 0x060400, bridgeCfg(PortDownstream, 3, 3, g3x4, g4x4)),
		rec("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:01.0", 0x060400, bridgeCfg(PortDownstream, 4, 4, g5x16, g5x16)),
		rec("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:00.0/0000:03:00.0", 0x010802, endpointCfg(0x010802, g3x4, g4x4)),
		rec("pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:01.0/0000:04:00.0", 0x030200, endpointCfg(0x030200, g5x16, g5x16)),
		rec("pci0000:00/0000:00:02.1", 0x060400, bridgeCfg(PortRootPort, 5, 5, g4x16, g4x16)),
		pf,
		vf("pci0000:00/0000:00:02.1/0000:05:00.2"),
		nic,
		rec("pci0000:00/0000:00:0e.0", 0x010400, nil),
		rec("pci0000:00/0000:00:0e.0/pci10000:00/10000:00:01.0", 0x060400, bridgeCfg(PortRootPort, 1, 1, g4x4, g4x4)),
		rec("pci0000:00/0000:00:0e.0/pci10000:00/10000:00:01.0/10000:01:00.0", 0x010802, endpointCfg(0x010802, g4x4, g4x4)),
		rec("pci0000:40/0000:40:00.0", 0x060400, bridgeCfg(PortRootPort, 0x41, 0x41, g5x16, g5x16)),
	}
	return recs
}

// addrs formats devices as their addresses; nil prints as "-".
func addrs(ds ...*Device) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = "-"
		if d != nil {
			out[i] = d.Address.String()
		}
	}
	return out
}

func mustAddr(t testing.TB, s string) Address {
	t.Helper()
	a, err := ParseAddress(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// dev returns the device at s, failing the test if there is none.
func dev(t testing.TB, top *Topology, s string) *Device {
	t.Helper()
	d := top.Device(mustAddr(t, s))
	if d == nil {
		t.Fatalf("no device %s", s)
	}
	return d
}

type devSummary struct {
	Parent, HostBridge, PF string
	Children, VFs          []string
	Ancestors              []string
	Incomplete             bool
}

func summarize(top *Topology) map[string]devSummary {
	m := make(map[string]devSummary)
	for _, d := range top.Devices {
		s := devSummary{
			Parent:     addrs(d.Parent)[0],
			PF:         addrs(d.PF)[0],
			Children:   addrs(d.Children...),
			VFs:        addrs(d.VFs...),
			Ancestors:  addrs(d.Ancestors()...),
			Incomplete: d.PathIncomplete,
		}
		if d.HostBridge != nil {
			s.HostBridge = d.HostBridge.Name
		}
		m[d.Address.String()] = s
	}
	return m
}

func TestNewTopology(t *testing.T) {
	top := NewTopology(fixtureRecords())
	if len(top.Errors) != 0 {
		t.Fatalf("Errors = %v", top.Errors)
	}
	none := []string{}
	want := map[string]devSummary{
		"0000:00:00.0": {Parent: "-", HostBridge: "pci0000:00", PF: "-", Children: none, VFs: none, Ancestors: none},
		"0000:00:02.0": {Parent: "-", HostBridge: "pci0000:00", PF: "-", Children: []string{"0000:01:00.0"}, VFs: none, Ancestors: none},
		"0000:01:00.0": {Parent: "0000:00:02.0", HostBridge: "pci0000:00", PF: "-", Children: []string{"0000:02:00.0", "0000:02:01.0"}, VFs: none,
			Ancestors: []string{"0000:00:02.0"}},
		"0000:02:00.0": {Parent: "0000:01:00.0", HostBridge: "pci0000:00", PF: "-", Children: []string{"0000:03:00.0"}, VFs: none,
			Ancestors: []string{"0000:01:00.0", "0000:00:02.0"}},
		"0000:02:01.0": {Parent: "0000:01:00.0", HostBridge: "pci0000:00", PF: "-", Children: []string{"0000:04:00.0"}, VFs: none,
			Ancestors: []string{"0000:01:00.0", "0000:00:02.0"}},
		"0000:03:00.0": {Parent: "0000:02:00.0", HostBridge: "pci0000:00", PF: "-", Children: none, VFs: none,
			Ancestors: []string{"0000:02:00.0", "0000:01:00.0", "0000:00:02.0"}},
		"0000:04:00.0": {Parent: "0000:02:01.0", HostBridge: "pci0000:00", PF: "-", Children: none, VFs: none,
			Ancestors: []string{"0000:02:01.0", "0000:01:00.0", "0000:00:02.0"}},
		"0000:00:02.1": {Parent: "-", HostBridge: "pci0000:00", PF: "-", Children: []string{"0000:05:00.0", "0000:05:00.2", "0000:05:00.3"}, VFs: none, Ancestors: none},
		"0000:05:00.0": {Parent: "0000:00:02.1", HostBridge: "pci0000:00", PF: "-", Children: none, VFs: []string{"0000:05:00.2", "0000:05:00.3"},
			Ancestors: []string{"0000:00:02.1"}},
		"0000:05:00.2":  {Parent: "0000:00:02.1", HostBridge: "pci0000:00", PF: "0000:05:00.0", Children: none, VFs: none, Ancestors: []string{"0000:00:02.1"}},
		"0000:05:00.3":  {Parent: "0000:00:02.1", HostBridge: "pci0000:00", PF: "0000:05:00.0", Children: none, VFs: none, Ancestors: []string{"0000:00:02.1"}},
		"0000:00:0e.0":  {Parent: "-", HostBridge: "pci0000:00", PF: "-", Children: none, VFs: none, Ancestors: none},
		"10000:00:01.0": {Parent: "-", HostBridge: "pci10000:00", PF: "-", Children: []string{"10000:01:00.0"}, VFs: none, Ancestors: none},
		"10000:01:00.0": {Parent: "10000:00:01.0", HostBridge: "pci10000:00", PF: "-", Children: none, VFs: none, Ancestors: []string{"10000:00:01.0"}},
		"0000:40:00.0":  {Parent: "-", HostBridge: "pci0000:40", PF: "-", Children: []string{"0000:41:00.0"}, VFs: none, Ancestors: none},
		"0000:41:00.0":  {Parent: "0000:40:00.0", HostBridge: "pci0000:40", PF: "-", Children: none, VFs: none, Ancestors: []string{"0000:40:00.0"}},
	}
	if diff := cmp.Diff(want, summarize(top)); diff != "" {
		t.Errorf("tree mismatch (-want +got):\n%s", diff)
	}

	wantOrder := []string{"0000:00:00.0", "0000:00:02.0", "0000:00:02.1", "0000:00:0e.0", "0000:01:00.0", "0000:02:00.0",
		"0000:02:01.0", "0000:03:00.0", "0000:04:00.0", "0000:05:00.0", "0000:05:00.2", "0000:05:00.3",
		"0000:40:00.0", "0000:41:00.0", "10000:00:01.0", "10000:01:00.0"}
	if diff := cmp.Diff(wantOrder, addrs(top.Devices...)); diff != "" {
		t.Errorf("Devices order (-want +got):\n%s", diff)
	}

	type hbSummary struct {
		Name        string
		Domain      uint32
		Bus         uint8
		Devices     []string
		FirstDevice string
	}
	var hbs []hbSummary
	for _, hb := range top.HostBridges {
		hbs = append(hbs, hbSummary{hb.Name, hb.Domain, hb.Bus, addrs(hb.Devices...), addrs(hb.FirstDevice())[0]})
	}
	wantHBs := []hbSummary{
		{"pci0000:00", 0, 0, []string{"0000:00:00.0", "0000:00:02.0", "0000:00:02.1", "0000:00:0e.0"}, "0000:00:00.0"},
		{"pci0000:40", 0, 0x40, []string{"0000:40:00.0"}, "0000:40:00.0"},
		{"pci10000:00", 0x10000, 0, []string{"10000:00:01.0"}, "10000:00:01.0"},
	}
	if diff := cmp.Diff(wantHBs, hbs); diff != "" {
		t.Errorf("HostBridges (-want +got):\n%s", diff)
	}
	if fd := (&HostBridge{}).FirstDevice(); fd != nil {
		t.Errorf("FirstDevice of an empty root bus = %s, want nil", fd.Address)
	}
}

type switchSummary struct {
	Upstream   string
	Downstream []string
	Inferred   bool
}

func switches(top *Topology) []switchSummary {
	var out []switchSummary
	for _, s := range top.Switches {
		out = append(out, switchSummary{s.Upstream.Address.String(), addrs(s.Downstream...), s.Inferred})
	}
	return out
}

func TestSwitches(t *testing.T) {
	root := NewTopology(fixtureRecords())
	want := []switchSummary{{"0000:01:00.0", []string{"0000:02:00.0", "0000:02:01.0"}, false}}
	if diff := cmp.Diff(want, switches(root)); diff != "" {
		t.Errorf("root view switches (-want +got):\n%s", diff)
	}

	// Without root only 64 bytes are readable: port types are unknown and the
	// grouping comes from the tree's shape.
	recs := fixtureRecords()
	for i := range recs {
		if len(recs[i].Config) > ConfigHeaderSize {
			recs[i].Config = recs[i].Config[:ConfigHeaderSize]
		}
	}
	user := NewTopology(recs)
	want[0].Inferred = true
	if diff := cmp.Diff(want, switches(user)); diff != "" {
		t.Errorf("unprivileged view switches (-want +got):\n%s", diff)
	}
	for _, d := range user.Devices {
		if _, ok := d.PortType(); ok {
			t.Errorf("%s: port type known from 64 bytes", d.Address)
		}
		if _, known := d.ACS(); known && d.IsBridge() {
			t.Errorf("%s: ACS known from 64 bytes", d.Address)
		}
	}

	// Two nested switches of unknown type: the alternation keeps the nested
	// downstream port from being taken for an upstream port.
	nested := []Record{
		rec("pci0000:00/0000:00:01.0", 0x060400, nil),
		rec("pci0000:00/0000:00:01.0/0000:01:00.0", 0x060400, nil),
		rec("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0", 0x060400, nil),
		rec("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0", 0x060400, nil),
		rec("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0/0000:04:00.0", 0x060400, nil),
		rec("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0/0000:04:00.0/0000:05:00.0", 0x030200, nil),
		// A bridge with only endpoints below a root port is not a switch.
		rec("pci0000:00/0000:00:02.0", 0x060400, nil),
		rec("pci0000:00/0000:00:02.0/0000:06:00.0", 0x060400, nil),
		rec("pci0000:00/0000:00:02.0/0000:06:00.0/0000:07:00.0", 0x020000, nil),
	}
	wantNested := []switchSummary{
		{"0000:01:00.0", []string{"0000:02:00.0"}, true},
		{"0000:03:00.0", []string{"0000:04:00.0"}, true},
	}
	if diff := cmp.Diff(wantNested, switches(NewTopology(nested))); diff != "" {
		t.Errorf("nested switches (-want +got):\n%s", diff)
	}
}

func TestNewTopologyErrors(t *testing.T) {
	recs := fixtureRecords()
	drop := func(s string) {
		recs = slices.DeleteFunc(recs, func(r Record) bool { return r.Address.String() == s })
	}
	drop("0000:02:00.0") // a DSP: the NVMe below it must still be placed
	drop("0000:05:00.0") // a PF: its VFs lose it
	bad := rec("pci0000:00/0000:00:1f.0", 0x060100, newCfg(0xffff, 0xffff, 0xffffff, 0xff).bytes(ConfigSize))
	bad.Err = errors.New("read failed")
	recs = append(recs,
		bad,
		rec("pci0000:00/0000:00:02.0", 0x060400, nil),                        // duplicate
		rec("bogus/0000:00:1e.0", 0x060400, nil),                             // no host bridge
		rec("pci0000:00/0000:00:1d.0/0000:00:1d.1", 0x020000, nil),           // parent missing, none of its path present
		Record{Address: Address{Bus: 0x70}, Path: "pci0000:00/0000:70:00.1"}, // path of another function
	)
	top := NewTopology(recs)
	var msgs []string
	for _, err := range top.Errors {
		msgs = append(msgs, err.Error())
	}
	slices.Sort(msgs)
	want := []string{
		"pcie: 0000:00:02.0: duplicate record dropped",
		"pcie: 0000:00:1d.1: bridge 0000:00:1d.0 of its sysfs path is missing",
		"pcie: 0000:00:1e.0: no host bridge in sysfs path \"bogus/0000:00:1e.0\"",
		"pcie: 0000:00:1f.0: invalid config space: header reads all ones (function absent or in error)",
		"pcie: 0000:00:1f.0: read failed",
		"pcie: 0000:03:00.0: bridge 0000:02:00.0 of its sysfs path is missing",
		"pcie: 0000:05:00.2: physical function 0000:05:00.0 missing",
		"pcie: 0000:05:00.3: physical function 0000:05:00.0 missing",
		"pcie: 0000:70:00.0: sysfs path \"pci0000:00/0000:70:00.1\" does not end in the function's address",
	}
	if diff := cmp.Diff(want, msgs); diff != "" {
		t.Errorf("Errors (-want +got):\n%s", diff)
	}
	if !slices.ContainsFunc(top.Errors, func(e error) bool { return errors.Is(e, bad.Err) }) {
		t.Errorf("record error not wrapped")
	}
	if !slices.ContainsFunc(top.Errors, func(e error) bool { return errors.Is(e, ErrInvalidConfig) }) {
		t.Errorf("config error not wrapped")
	}
	for _, err := range top.Errors {
		var de *DeviceError
		if !errors.As(err, &de) || top.Device(de.Address) == nil {
			t.Errorf("%v: not a *DeviceError naming a device of the tree", err)
		}
	}

	got := summarize(top)
	nvme := got["0000:03:00.0"]
	if nvme.Parent != "0000:01:00.0" || !nvme.Incomplete {
		t.Errorf("NVMe below a missing DSP: parent %s, incomplete %v; want 0000:01:00.0, true", nvme.Parent, nvme.Incomplete)
	}
	if d := dev(t, top, "0000:00:1f.0"); d.Config != nil || d.HostBridge == nil {
		t.Errorf("undecodable device: Config %v, HostBridge %v; want nil config, kept in the tree", d.Config, d.HostBridge)
	}
	orphan := got["0000:00:1d.1"]
	if orphan.Parent != "-" || !orphan.Incomplete || orphan.HostBridge != "pci0000:00" {
		t.Errorf("orphan: %+v", orphan)
	}
	hb := top.HostBridges[0]
	if slices.Contains(addrs(hb.Devices...), "0000:00:1d.1") {
		t.Errorf("orphan listed on the root bus: %v", addrs(hb.Devices...))
	}
}

func TestNewTopologyCycle(t *testing.T) {
	// Two records naming each other as parent: the walk must end and say so.
	recs := []Record{
		rec("pci0000:00/0000:00:01.0", 0x060400, nil),
		rec("pci0000:00/0000:00:01.0/0000:02:00.0/0000:01:00.0", 0x060400, nil),
		rec("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0", 0x060400, nil),
	}
	top := NewTopology(recs)
	if len(top.Errors) != 1 || !strings.Contains(top.Errors[0].Error(), "closes a loop") {
		t.Fatalf("Errors = %v, want one loop error", top.Errors)
	}
	for _, d := range top.Devices {
		if len(d.Ancestors()) > len(top.Devices) {
			t.Errorf("%s: %d ancestors", d.Address, len(d.Ancestors()))
		}
	}
}

// TestNewTopologyPFChain: physfn links that chain or loop (a hostile tree; the
// kernel links VFs to a PF only) are refused, so that walks through a VF's PF
// (Link, Upstream) end.
func TestNewTopologyPFChain(t *testing.T) {
	vf := func(p, pf string) Record {
		r := rec(p, 0x020000, nil)
		a := mustAddr(t, pf)
		r.PhysFn = &a
		return r
	}
	top := NewTopology([]Record{
		rec("pci0000:00/0000:00:01.0", 0x020000, nil),
		vf("pci0000:00/0000:00:01.1", "0000:00:01.0"), // a VF of a PF
		vf("pci0000:00/0000:00:01.2", "0000:00:01.1"), // a VF of that VF
		vf("pci0000:00/0000:00:02.0", "0000:00:03.0"), // two VFs of each other
		vf("pci0000:00/0000:00:03.0", "0000:00:02.0"),
	})
	var msgs []string
	for _, err := range top.Errors {
		msgs = append(msgs, err.Error())
	}
	want := []string{
		"pcie: 0000:00:01.2: physical function 0000:00:01.1 is itself a virtual function",
		"pcie: 0000:00:02.0: physical function 0000:00:03.0 is itself a virtual function",
		"pcie: 0000:00:03.0: physical function 0000:00:02.0 is itself a virtual function",
	}
	if diff := cmp.Diff(want, msgs); diff != "" {
		t.Errorf("Errors (-want +got):\n%s", diff)
	}
	if got := addrs(dev(t, top, "0000:00:01.1").PF); got[0] != "0000:00:01.0" {
		t.Errorf("VF of a PF: PF %v", got)
	}
	for _, d := range top.Devices {
		d.Link() // must end
		if d.PF != nil && d.PF.PF != nil {
			t.Errorf("%s: PF %s has a PF itself", d.Address, d.PF.Address)
		}
	}
}

func TestCommonUpstream(t *testing.T) {
	top := NewTopology(fixtureRecords())
	tests := []struct {
		a, b         string
		common       string
		distA, distB int
	}{
		{"0000:03:00.0", "0000:04:00.0", "0000:01:00.0", 2, 2}, // two DSPs of one switch: 4
		{"0000:03:00.0", "0000:03:00.0", "0000:03:00.0", 0, 0},
		{"0000:05:00.2", "0000:05:00.0", "0000:00:02.1", 1, 1}, // a VF climbs through its PF's parent
		{"0000:05:00.2", "0000:05:00.3", "0000:00:02.1", 1, 1},
		{"0000:00:02.0", "0000:03:00.0", "0000:00:02.0", 0, 3},
		{"0000:03:00.0", "0000:05:00.0", "-", 4, 2}, // no common bridge: the chain lengths
		{"0000:04:00.0", "0000:41:00.0", "-", 4, 2},
		{"0000:00:00.0", "0000:00:0e.0", "-", 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.a+"-"+tt.b, func(t *testing.T) {
			c, da, db := CommonUpstream(dev(t, top, tt.a), dev(t, top, tt.b))
			got := fmt.Sprint(addrs(c)[0], da, db)
			if want := fmt.Sprint(tt.common, tt.distA, tt.distB); got != want {
				t.Errorf("CommonUpstream = %s, want %s", got, want)
			}
			if c2, db2, da2 := CommonUpstream(dev(t, top, tt.b), dev(t, top, tt.a)); c2 != c || da2 != da || db2 != db {
				t.Errorf("not symmetric: %v %d %d", addrs(c2), db2, da2)
			}
		})
	}
}

func TestCommonUpstreamAllocs(t *testing.T) {
	top := NewTopology(fixtureRecords())
	a, b := dev(t, top, "0000:03:00.0"), dev(t, top, "0000:05:00.3")
	if n := testing.AllocsPerRun(100, func() { CommonUpstream(a, b) }); n != 0 {
		t.Errorf("CommonUpstream allocates %v times", n)
	}
}

func TestPath(t *testing.T) {
	top := NewTopology(fixtureRecords())
	type pathSummary struct {
		Hops             []string
		Common           string
		FromHost, ToHost string
		Narrowest        string
	}
	sum := func(p Path) pathSummary {
		s := pathSummary{Common: addrs(p.Common)[0], Narrowest: p.Narrowest.String()}
		for _, h := range p.Hops {
			s.Hops = append(s.Hops, h.Device.Address.String()+" "+h.Link.Current.String())
		}
		if p.FromHost != nil {
			s.FromHost, s.ToHost = p.FromHost.Name, p.ToHost.Name
		}
		return s
	}
	tests := []struct {
		a, b string
		want pathSummary
	}{
		{"0000:03:00.0", "0000:04:00.0", pathSummary{
			Hops:   []string{"0000:03:00.0 Gen3 x4", "0000:02:00.0 Gen3 x4", "0000:01:00.0 Gen4 x16", "0000:02:01.0 Gen5 x16", "0000:04:00.0 Gen5 x16"},
			Common: "0000:01:00.0", Narrowest: "Gen3 x4",
		}},
		{"0000:04:00.0", "0000:41:00.0", pathSummary{
			Hops: []string{"0000:04:00.0 Gen5 x16", "0000:02:01.0 Gen5 x16", "0000:01:00.0 Gen4 x16", "0000:00:02.0 Gen4 x16",
				"0000:40:00.0 Gen5 x16", "0000:41:00.0 Gen5 x16"},
			Common: "-", FromHost: "pci0000:00", ToHost: "pci0000:40", Narrowest: "Gen4 x16",
		}},
		{"0000:05:00.3", "0000:05:00.2", pathSummary{
			// 05:00.3 has its speed from sysfs and its width from the PF.
			Hops:   []string{"0000:05:00.3 Gen4 x16", "0000:00:02.1 Gen4 x16", "0000:05:00.2 Gen4 x16"},
			Common: "0000:00:02.1", Narrowest: "Gen4 x16",
		}},
		{"0000:00:00.0", "0000:00:00.0", pathSummary{
			Hops: []string{"0000:00:00.0 Gen? x?"}, Common: "0000:00:00.0", Narrowest: "Gen? x?",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.a+"-"+tt.b, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, sum(top.Path(dev(t, top, tt.a), dev(t, top, tt.b)))); diff != "" {
				t.Errorf("Path mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeviceLink(t *testing.T) {
	top := NewTopology(fixtureRecords())
	sysfsOnly := &Device{Record: Record{CurrentLink: Link{2, 8}, MaxLink: Link{4, 8}}}
	fromConfig := dev(t, top, "0000:03:00.0")
	fromConfig.CurrentLink = Link{1, 1} // config space wins over sysfs
	tests := []struct {
		name     string
		d        *Device
		want     LinkState
		degraded bool
	}{
		{"config space", fromConfig, LinkState{Link{3, 4}, Link{4, 4}}, true},
		{"sysfs only", sysfsOnly, LinkState{Link{2, 8}, Link{4, 8}}, true},
		{"full speed", dev(t, top, "0000:04:00.0"), LinkState{Link{5, 16}, Link{5, 16}}, false},
		{"VF falls back to its PF", dev(t, top, "0000:05:00.2"), LinkState{Link{4, 16}, Link{4, 16}}, false},
		{"unknown", &Device{}, LinkState{}, false},
		// lspci never marks a root port: the device below may be what limits it.
		{"root port below its capability", dev(t, top, "0000:00:02.0"), LinkState{Link{4, 16}, Link{5, 16}}, false},
		{"width only", &Device{Record: Record{CurrentLink: Link{Width: 4}, MaxLink: Link{Width: 8}}}, LinkState{Link{0, 4}, Link{0, 8}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.d.Link()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Link mismatch (-want +got):\n%s", diff)
			}
			if down, _ := tt.d.LinkDowngraded(); down != tt.degraded {
				t.Errorf("LinkDowngraded = %v, want %v", down, tt.degraded)
			}
		})
	}
}

func TestQueries(t *testing.T) {
	top := NewTopology(fixtureRecords())
	tests := []struct {
		name string
		got  []*Device
		want []string
	}{
		{"GPUs", top.GPUs(), []string{"0000:04:00.0", "0000:41:00.0"}},
		{"NICs", top.NICs(), []string{"0000:05:00.0", "0000:05:00.2", "0000:05:00.3"}},
		{"NVMe", top.NVMe(), []string{"0000:03:00.0", "10000:01:00.0"}},
		{"Accelerators", top.accelerators(), []string{}},
		{"Bridges", top.bridges(), []string{"0000:00:02.0", "0000:00:02.1", "0000:01:00.0", "0000:02:00.0", "0000:02:01.0", "0000:40:00.0", "10000:00:01.0"}},
		{"Endpoints", top.Endpoints(), []string{"0000:00:00.0", "0000:00:0e.0", "0000:03:00.0", "0000:04:00.0", "0000:05:00.0",
			"0000:05:00.2", "0000:05:00.3", "0000:41:00.0", "10000:01:00.0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, addrs(tt.got...)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tt.name, diff)
			}
		})
	}
}

func TestClassPredicates(t *testing.T) {
	tests := []struct {
		class                               uint32
		vendor                              uint16 // 0: NVIDIA
		header                              int    // -1: no config space
		bridge, gpu, nic, nvme, accelerator bool
	}{
		{0x030000, 0, -1, false, true, false, false, false},
		{0x030200, 0, 0, false, true, false, false, false},
		{0x030000, 0x1002, 0, false, true, false, false, false},
		{0x030000, 0x1a03, -1, false, false, false, false, false}, // ASPEED BMC video
		{0x030000, 0x102b, 0, false, false, false, false, false},  // Matrox BMC video
		{0x038000, 0, 0, false, false, false, false, false},
		{0x020000, 0, -1, false, false, true, false, false},
		{0x020700, 0, 0, false, false, true, false, false},
		{0x010802, 0, 0, false, false, false, true, false},
		{0x010801, 0, 0, false, false, false, false, false},
		{0x120000, 0, 0, false, false, false, false, true},
		{0x060400, 0, -1, true, false, false, false, false},
		{0x060401, 0, -1, true, false, false, false, false},
		{0x060900, 0, -1, true, false, false, false, false},
		{0x060700, 0, 2, true, false, false, false, false},
		{0x060000, 0, 0, false, false, false, false, false},
		{0x060400, 0, 0, false, false, false, false, false}, // header type wins over class
	}
	for _, tt := range tests {
		vendor := tt.vendor
		if vendor == 0 {
			vendor = VendorNVIDIA
		}
		d := &Device{Record: Record{Class: tt.class, Vendor: vendor}}
		if tt.header >= 0 {
			d.Config = &Config{Class: tt.class, Vendor: vendor, HeaderType: uint8(tt.header)}
		}
		got := [5]bool{d.IsBridge(), d.IsGPU(), d.IsNIC(), d.IsNVMe(), d.IsAccelerator()}
		want := [5]bool{tt.bridge, tt.gpu, tt.nic, tt.nvme, tt.accelerator}
		if got != want {
			t.Errorf("class %06x header %d: bridge, gpu, nic, nvme, accelerator = %v, want %v", tt.class, tt.header, got, want)
		}
	}
}

// benchRecords builds about 1,100 functions: 2 host bridges, each with 4 root
// ports holding a switch whose 2 downstream ports hold a GPU and a dual-port NIC
// with 64 VFs per port.
func benchRecords() []Record {
	var recs []Record
	add := func(p string, class uint32, cfg []byte) Address {
		recs = append(recs, rec(p, class, cfg))
		return recs[len(recs)-1].Address
	}
	g5 := Link{5, 16}
	for h := range 2 {
		hbBus := h * 0x80
		hb := fmt.Sprintf("pci0000:%02x", hbBus)
		bus := hbBus
		for rp := range 4 {
			rpPath := fmt.Sprintf("%s/0000:%02x:%02x.0", hb, hbBus, rp+1)
			add(rpPath, 0x060400, bridgeCfg(PortRootPort, 0, 0, g5, g5))
			bus++
			uspPath := fmt.Sprintf("%s/0000:%02x:00.0", rpPath, bus)
			add(uspPath, 0x060400, bridgeCfg(PortUpstream, 0, 0, g5, g5))
			bus++
			dspBus := bus
			for dsp := range 2 {
				dspPath := fmt.Sprintf("%s/0000:%02x:%02x.0", uspPath, dspBus, dsp)
				add(dspPath, 0x060400, bridgeCfg(PortDownstream, 0, 0, g5, g5))
				bus++
				if dsp == 0 {
					add(fmt.Sprintf("%s/0000:%02x:00.0", dspPath, bus), 0x030200, endpointCfg(0x030200, g5, g5))
					continue
				}
				var pfs [2]Address
				for port := range pfs {
					pfs[port] = add(fmt.Sprintf("%s/0000:%02x:00.%d", dspPath, bus, port), 0x020000, endpointCfg(0x020000, g5, g5))
				}
				for vf := range 128 {
					devfn := vf + 2
					add(fmt.Sprintf("%s/0000:%02x:%02x.%x", dspPath, bus, devfn/8, devfn%8), 0x020000, nil)
					recs[len(recs)-1].PhysFn = &pfs[vf%2]
				}
			}
		}
	}
	return recs
}

func BenchmarkNewTopology(b *testing.B) {
	recs := benchRecords()
	b.ReportAllocs()
	for b.Loop() {
		NewTopology(recs)
	}
	b.ReportMetric(float64(len(recs)), "functions")
}

// BenchmarkCommonUpstream walks every ordered pair of endpoints, the work of
// p2pcheck pairs --all.
func BenchmarkCommonUpstream(b *testing.B) {
	top := NewTopology(benchRecords())
	eps := top.Endpoints()
	for b.Loop() {
		for _, x := range eps {
			for _, y := range eps {
				CommonUpstream(x, y)
			}
		}
	}
	b.ReportMetric(float64(len(eps)*len(eps)), "pairs/op")
}

// FuzzNewTopology builds trees from arbitrary sysfs paths, one record per line
// ("PATH" or "PATH PHYSFN"), and checks that the tree is consistent and every walk
// ends.
func FuzzNewTopology(f *testing.F) {
	f.Add("pci0000:00/0000:00:01.0\npci0000:00/0000:00:01.0/0000:01:00.0\npci0000:00/0000:00:01.0/0000:01:00.1 0000:01:00.0")
	f.Add("pci0000:00/0000:00:0e.0/pci10000:00/10000:00:01.0\npci0000:00/0000:00:0e.0/pci10000:00/10000:00:01.0/10000:01:00.0")
	f.Add("pci0000:00/0000:00:01.0/0000:02:00.0/0000:01:00.0\npci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0")
	f.Add("pci0000:00/0000:00:01.0 0000:00:01.0\npci0000:00/0000:00:02.0/0000:00:01.0")
	f.Fuzz(func(t *testing.T, in string) {
		var recs []Record
		for line := range strings.Lines(in) {
			p, pf, _ := strings.Cut(strings.TrimSpace(line), " ")
			a, err := ParseAddress(path.Base(p))
			if err != nil {
				continue
			}
			r := Record{Address: a, Path: p, Class: 0x060400}
			if b, err := ParseAddress(pf); err == nil {
				r.PhysFn, r.Class = &b, 0x020000
			}
			recs = append(recs, r)
		}
		top := NewTopology(recs)
		for _, d := range top.Devices {
			if top.Device(d.Address) != d {
				t.Fatalf("%s not found by address", d.Address)
			}
			if len(d.Ancestors()) > len(top.Devices) {
				t.Fatalf("%s: %d ancestors among %d devices", d.Address, len(d.Ancestors()), len(top.Devices))
			}
			for _, c := range d.Children {
				if c.Parent != d {
					t.Errorf("%s lists child %s whose parent is %v", d.Address, c.Address, addrs(c.Parent))
				}
			}
			if d.Parent != nil && !slices.Contains(d.Parent.Children, d) {
				t.Errorf("%s missing from its parent's children", d.Address)
			}
			for _, o := range top.Devices {
				c, da, db := CommonUpstream(d, o)
				if c2, db2, da2 := CommonUpstream(o, d); c2 != c || da2 != da || db2 != db {
					t.Fatalf("CommonUpstream(%s, %s) not symmetric", d.Address, o.Address)
				}
				if p := top.Path(d, o); p.Hops[0].Device != d || p.Hops[len(p.Hops)-1].Device != o {
					t.Fatalf("Path(%s, %s) does not run between them", d.Address, o.Address)
				}
			}
		}
		for _, hb := range top.HostBridges {
			for _, d := range hb.Devices {
				if d.Parent != nil || d.HostBridge != hb {
					t.Errorf("%s on root bus %s has parent %v", d.Address, hb.Name, addrs(d.Parent))
				}
			}
		}
	})
}

// TestNewTopologySnapshot builds the tree of a real machine (two H200 GPUs on the
// flat root bus of a Firecracker VM) from its captured config files.
func TestNewTopologySnapshot(t *testing.T) {
	var recs []Record
	for _, dev := range []string{"00.0", "01.0", "02.0", "03.0", "04.0", "05.0", "06.0", "07.0"} {
		a := "0000:00:" + dev
		cfg, err := os.ReadFile(filepath.Join("testdata", "h200-2gpu-vm", strings.ReplaceAll(a, ":", "_")+".config"))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec("pci0000:00/"+a, 0, cfg))
	}
	top := NewTopology(recs)
	if len(top.Errors) != 0 {
		t.Fatalf("Errors = %v", top.Errors)
	}
	if len(top.HostBridges) != 1 || len(top.HostBridges[0].Devices) != 8 {
		t.Fatalf("want one root bus with 8 functions, got %d host bridges", len(top.HostBridges))
	}
	if fd := top.HostBridges[0].FirstDevice(); fd.Config.Vendor != 0x8086 || fd.Config.Device != 0x0d57 {
		t.Errorf("FirstDevice = %04x:%04x, want 8086:0d57", fd.Config.Vendor, fd.Config.Device)
	}
	gpus := top.GPUs()
	if diff := cmp.Diff([]string{"0000:00:06.0", "0000:00:07.0"}, addrs(gpus...)); diff != "" {
		t.Fatalf("GPUs (-want +got):\n%s", diff)
	}
	for _, g := range gpus {
		if acs, known := g.ACS(); !known || acs != nil {
			t.Errorf("%s: ACS %v, known %v; want known absent", g.Address, acs, known)
		}
		if pt, ok := g.PortType(); !ok || pt != PortEndpoint {
			t.Errorf("%s: port type %v, %v", g.Address, pt, ok)
		}
	}
	p := top.Path(gpus[0], gpus[1])
	if p.Common != nil || p.FromHost != top.HostBridges[0] || p.ToHost != p.FromHost || len(p.Hops) != 2 {
		t.Errorf("GPU path: common %v, hosts %v %v, %d hops; want through the one host bridge", addrs(p.Common), p.FromHost, p.ToHost, len(p.Hops))
	}
	if got := p.Narrowest.String(); got != "Gen5 x16" {
		t.Errorf("Narrowest = %s, want Gen5 x16", got)
	}
	if len(top.Switches) != 0 || len(top.bridges()) != 0 {
		t.Errorf("switches %d, bridges %d; want none", len(top.Switches), len(top.bridges()))
	}
}

// TestVFConfig checks that a VF's config space, whose ID registers read 0xffff,
// is decoded (ACS included) and takes its IDs from sysfs.
func TestVFConfig(t *testing.T) {
	pf := rec("pci0000:00/0000:00:02.0/0000:01:00.0", 0x020000, endpointCfg(0x020000, Link{4, 16}, Link{4, 16}))
	pf.Vendor, pf.Device = 0x15b3, 0x1021
	vfc := newCfg(0xffff, 0xffff, 0x020000, 0)
	vfc.ext(0x100, ExtCapIDACS, 1, append(le16(0x005f), le16(0x0000)...)...)
	vfc.cap(0x40, CapIDExpress, expressBody(PortEndpoint, false, 4, 16, 0, 4, 16)...)
	vf := rec("pci0000:00/0000:00:02.0/0000:01:00.1", 0x020000, vfc.bytes(ConfigExpSize))
	vf.Vendor, vf.Device, vf.PhysFn = 0x15b3, 0x101e, &pf.Address
	rp := rec("pci0000:00/0000:00:02.0", 0x060400, bridgeCfg(PortRootPort, 1, 1, Link{4, 16}, Link{4, 16}))
	top := NewTopology([]Record{rp, pf, vf})
	if len(top.Errors) != 0 {
		t.Fatalf("errors: %v", top.Errors)
	}
	d := dev(t, top, "0000:01:00.1")
	if d.Config == nil {
		t.Fatal("VF config space not decoded")
	}
	if got := [2]uint16{d.Config.Vendor, d.Config.Device}; got != [2]uint16{0x15b3, 0x101e} {
		t.Errorf("VF IDs from config %04x:%04x, want 15b3:101e from sysfs", got[0], got[1])
	}
	if acs, known := d.ACS(); !known || acs == nil || acs.Control != 0 {
		t.Errorf("VF ACS = %+v, known %v; want control 0, known", acs, known)
	}
}

// TestDeepChainLinear builds a chain of bridges, each below the one before, as a
// hostile snapshot can: depths, Ancestors and CommonUpstream must be right, and
// building the tree must cost memory linear in the functions (storing every chain
// would be quadratic). Allocation is measured in bytes, never in time.
func TestDeepChainLinear(t *testing.T) {
	const n = 2000
	recs := make([]Record, n)
	p := "pci0000:00"
	for i := range recs {
		p += fmt.Sprintf("/%04x:%02x:%02x.%d", i>>8, i&0xff, 0, 0)
		recs[i] = rec(p, 0x060400, nil)
	}
	var top *Topology
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	top = NewTopology(recs)
	runtime.ReadMemStats(&after)
	// The paths alone are quadratic in a chain; what NewTopology allocates must not be.
	if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(n*2048); got > limit {
		t.Errorf("NewTopology allocated %d bytes for a chain of %d, want at most %d", got, n, limit)
	}
	last := top.Devices[n-1]
	if last.Depth() != n-1 || len(last.Ancestors()) != n-1 {
		t.Errorf("depth %d, %d ancestors; want %d", last.Depth(), len(last.Ancestors()), n-1)
	}
	if c, da, db := CommonUpstream(last, top.Devices[n/2]); c != top.Devices[n/2] || da != n-1-n/2 || db != 0 {
		t.Errorf("CommonUpstream = %v %d %d", c, da, db)
	}
}

// TestBelowEndpoint: functions whose parent has a type-0 header (a GPU below a GPU,
// a bridge below an NVMe controller) form a tree the kernel cannot build. They are
// kept where their paths put them, marked, and each such parent is reported once;
// a parent whose type was not read is not judged.
func TestBelowEndpoint(t *testing.T) {
	gpu := endpointCfg(0x030200, Link{5, 16}, Link{5, 16})
	top := NewTopology([]Record{
		rec("pci0000:00/0000:00:01.0", 0x030200, gpu),
		rec("pci0000:00/0000:00:01.0/0000:01:00.0", 0x030200, gpu),
		rec("pci0000:00/0000:00:01.0/0000:01:00.1", 0x030200, gpu),
		rec("pci0000:00/0000:00:02.0", 0x010802, nil), // no config space: its class says endpoint
		rec("pci0000:00/0000:00:02.0/0000:02:00.0", 0x060400, bridgeCfg(PortDownstream, 3, 3, Link{4, 4}, Link{4, 4})),
		rec("pci0000:00/0000:00:02.0/0000:02:00.0/0000:03:00.0", 0x020000, nil), // below a bridge: fine
		rec("pci0000:00/0000:00:03.0", 0, nil),                                  // nothing read
		rec("pci0000:00/0000:00:03.0/0000:04:00.0", 0x020000, nil),
		rec("pci0000:00/0000:00:04.0", 0x060400, bridgeCfg(PortRootPort, 5, 5, Link{4, 4}, Link{4, 4})),
		rec("pci0000:00/0000:00:04.0/0000:05:00.0", 0x020000, nil),
	})
	var msgs []string
	for _, err := range top.Errors {
		msgs = append(msgs, err.Error())
	}
	want := []string{
		"pcie: 0000:00:01.0: 2 function(s) below it (the first 0000:01:00.0), but it has a type-0 header and no secondary bus: " +
			"the kernel cannot build this tree, so verdicts through it are unknown",
		"pcie: 0000:00:02.0: 1 function(s) below it (the first 0000:02:00.0), but it has a type-0 header and no secondary bus: " +
			"the kernel cannot build this tree, so verdicts through it are unknown",
	}
	if diff := cmp.Diff(want, msgs); diff != "" {
		t.Errorf("Errors (-want +got):\n%s", diff)
	}
	var below []string
	for _, d := range top.Devices {
		if d.BelowEndpoint {
			below = append(below, d.Address.String())
		}
	}
	if diff := cmp.Diff([]string{"0000:01:00.0", "0000:01:00.1", "0000:02:00.0"}, below); diff != "" {
		t.Errorf("BelowEndpoint (-want +got):\n%s", diff)
	}
	if p := dev(t, top, "0000:01:00.0").Parent; p == nil || p.Address.String() != "0000:00:01.0" {
		t.Errorf("a GPU below a GPU: parent %v, want it kept below 0000:00:01.0", p)
	}
}
