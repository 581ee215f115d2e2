package p2pdma

import (
	"fmt"
	"testing"

	"github.com/p2pkit/p2pkit/pcie"
)

// builder assembles a pcie.Topology by hand for tests, the way pcie.NewTopology
// would from sysfs: Parent, HostBridge, PF links, and root-bus device lists.
type builder struct {
	t *pcie.Topology
}

func newBuilder() *builder { return &builder{t: &pcie.Topology{}} }

// host adds host bridge pciDDDD:BB.
func (b *builder) host(domain uint32, bus uint8) *pcie.HostBridge {
	h := &pcie.HostBridge{Name: fmt.Sprintf("pci%04x:%02x", domain, bus), Domain: domain, Bus: bus}
	b.t.HostBridges = append(b.t.HostBridges, h)
	return h
}

// noACS as the acs argument of fn means the function has no ACS capability.
const noACS = -1

// fn adds a function at bdf below parent (nil: on h's root bus). id is
// vendor<<16|device, acs the ACS Control value or noACS.
func (b *builder) fn(tb testing.TB, h *pcie.HostBridge, parent *pcie.Device, bdf string, id uint32, pt pcie.PortType, acs int) *pcie.Device {
	tb.Helper()
	a, err := pcie.ParseAddress(bdf)
	if err != nil {
		tb.Fatal(err)
	}
	d := &pcie.Device{
		Record: pcie.Record{Address: a, Vendor: uint16(id >> 16), Device: uint16(id)},
		Config: &pcie.Config{Size: 4096, CapsKnown: true, ExtCapsKnown: true,
			Express: &pcie.Express{PortType: pt}},
		Parent:     parent,
		HostBridge: h,
	}
	if acs != noACS {
		d.Config.ACS = &pcie.ACS{Offset: 0x148, Capability: 0x5f, Control: uint16(acs)}
	}
	if parent == nil {
		h.Devices = append(h.Devices, d)
	} else {
		parent.Children = append(parent.Children, d)
	}
	b.t.Devices = append(b.t.Devices, d)
	return d
}

// vf adds a virtual function of pf at bdf (on pf's bus, below pf's parent).
func (b *builder) vf(tb testing.TB, pf *pcie.Device, bdf string) *pcie.Device {
	tb.Helper()
	a, err := pcie.ParseAddress(bdf)
	if err != nil {
		tb.Fatal(err)
	}
	pfAddr := pf.Address
	d := &pcie.Device{
		Record: pcie.Record{Address: a, Vendor: pf.Vendor, Device: pf.Device + 1, PhysFn: &pfAddr},
		Config: &pcie.Config{Size: 4096, CapsKnown: true, ExtCapsKnown: true,
			Express: &pcie.Express{PortType: pcie.PortEndpoint}},
		Parent:     pf.Parent,
		HostBridge: pf.HostBridge,
		PF:         pf,
	}
	pf.VFs = append(pf.VFs, d)
	b.t.Devices = append(b.t.Devices, d)
	return d
}

// unread makes d look as an unprivileged reader sees it: 64 bytes of config space,
// so neither the PCI Express capability nor ACS is known.
func unread(d *pcie.Device) {
	d.Config = &pcie.Config{Size: 64}
}

// IDs used in the tests.
const (
	idQ35Host    = 0x808629c0 // QEMU q35 MCH, not whitelisted
	idIceLake    = 0x808609a2 // whitelisted, no flags
	idXeonE5     = 0x80863c00 // whitelisted, REQ_SAME_HOST_BRIDGE
	idSkylakeRPA = 0x80862030 // whitelisted Skylake-E root port
	idQAT4xxx    = 0x80864940 // whitelisted from 7.2
	idZhaoxin    = 0x1d171003 // whitelisted from 7.4, REQ_SAME_HOST_BRIDGE
	idQEMURP     = 0x1b36000c
	idTIUp       = 0x104c8232
	idTIDown     = 0x104c8233
	idPEX        = 0x1000c030 // Broadcom PEX Gen5 switch
	idNVMe       = 0x1b360010
	idH200       = 0x10de2335
)

// switchTopo is a host bridge whose first function is hostID, a root port, a switch
// with two downstream ports and one endpoint below each:
//
//	00:00.0 host   00:01.0 RP -> 01:00.0 USP -> 02:00.0 DSP0 -> 03:00.0 EP0
//	                                         \-> 02:01.0 DSP1 -> 04:00.0 EP1
type switchTopo struct {
	*builder
	host                    *pcie.HostBridge
	hostDev, rp, usp        *pcie.Device
	dsp0, dsp1, ep0, ep1    *pcie.Device
	rpACS, uspACS           int
	dsp0ACS, dsp1ACS        int
	ep0ACS                  int
	hostID, switchID, epsID uint32
}

func (s switchTopo) build(tb testing.TB) switchTopo {
	tb.Helper()
	if s.hostID == 0 {
		s.hostID = idQ35Host
	}
	up, down := uint32(idTIUp), uint32(idTIDown)
	if s.switchID != 0 {
		up, down = s.switchID, s.switchID
	}
	if s.epsID == 0 {
		s.epsID = idNVMe
	}
	s.builder = newBuilder()
	s.host = s.builder.host(0, 0)
	s.hostDev = s.fn(tb, s.host, nil, "00:00.0", s.hostID, pcie.PortRCiEP, noACS)
	s.rp = s.fn(tb, s.host, nil, "00:01.0", idQEMURP, pcie.PortRootPort, s.rpACS)
	s.usp = s.fn(tb, s.host, s.rp, "01:00.0", up, pcie.PortUpstream, s.uspACS)
	s.dsp0 = s.fn(tb, s.host, s.usp, "02:00.0", down, pcie.PortDownstream, s.dsp0ACS)
	s.dsp1 = s.fn(tb, s.host, s.usp, "02:01.0", down, pcie.PortDownstream, s.dsp1ACS)
	s.ep0 = s.fn(tb, s.host, s.dsp0, "03:00.0", s.epsID, pcie.PortEndpoint, s.ep0ACS)
	s.ep1 = s.fn(tb, s.host, s.dsp1, "04:00.0", s.epsID, pcie.PortEndpoint, noACS)
	return s
}

// plainSwitch is switchTopo without any ACS capability.
var plainSwitch = switchTopo{rpACS: noACS, uspACS: noACS, dsp0ACS: noACS, dsp1ACS: noACS, ep0ACS: noACS}

// twoRootPorts has one endpoint below each of two root ports of one host bridge, and
// a second host bridge pci0000:80 with its own root port and endpoint.
type twoRootPorts struct {
	*builder
	h0, h1          *pcie.HostBridge
	ep0, ep1, epFar *pcie.Device
}

func buildTwoRootPorts(tb testing.TB, host0, host1 uint32, rpACS int) twoRootPorts {
	tb.Helper()
	var r twoRootPorts
	r.builder = newBuilder()
	r.h0 = r.host(0, 0)
	r.fn(tb, r.h0, nil, "00:00.0", host0, pcie.PortRCiEP, noACS)
	rp1 := r.fn(tb, r.h0, nil, "00:01.0", idQEMURP, pcie.PortRootPort, rpACS)
	rp2 := r.fn(tb, r.h0, nil, "00:02.0", idQEMURP, pcie.PortRootPort, rpACS)
	r.ep0 = r.fn(tb, r.h0, rp1, "01:00.0", idNVMe, pcie.PortEndpoint, noACS)
	r.ep1 = r.fn(tb, r.h0, rp2, "02:00.0", idNVMe, pcie.PortEndpoint, noACS)
	r.h1 = r.host(0, 0x80)
	r.fn(tb, r.h1, nil, "80:00.0", host1, pcie.PortRCiEP, noACS)
	rp3 := r.fn(tb, r.h1, nil, "80:01.0", idQEMURP, pcie.PortRootPort, rpACS)
	r.epFar = r.fn(tb, r.h1, rp3, "81:00.0", idNVMe, pcie.PortEndpoint, noACS)
	return r
}
