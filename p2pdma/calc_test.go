package p2pdma

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/p2pkit/p2pkit/kversion"
	"github.com/p2pkit/p2pkit/pcie"
)

var (
	intel    = Platform{CPUVendor: "GenuineIntel", CPUFamily: 6, Kernel: kversion.Version{Major: 6, Minor: 12}}
	amdZen   = Platform{CPUVendor: "AuthenticAMD", CPUFamily: 25, Kernel: kversion.Version{Major: 6, Minor: 12}}
	amdOld   = Platform{CPUVendor: "AuthenticAMD", CPUFamily: 0x16, Kernel: kversion.Version{Major: 6, Minor: 12}}
	hygon    = Platform{CPUVendor: "HygonGenuine", CPUFamily: 0x18, Kernel: kversion.Version{Major: 6, Minor: 12}}
	acsIOMMU = int(pcie.ACSSourceValidation | pcie.ACSRequestRedirect | pcie.ACSCompletionRedirect | pcie.ACSUpstreamForwarding) // 0x001d, what Linux sets with an IOMMU
)

func withKernel(p Platform, major, minor int) Platform {
	p.Kernel = kversion.Version{Major: major, Minor: minor}
	return p
}

// outcome is the part of a Verdict the table checks.
type outcome struct {
	MapType     MapType
	Distance    int
	ACSRedirect []string
	KernelParam string        // Fix.KernelParam, "" without a Fix
	Unknowns    []UnknownKind // the kinds of Verdict.Unknowns, in order
}

func project(v Verdict) outcome {
	o := outcome{MapType: v.MapType, Distance: v.Distance}
	for _, u := range v.Unknowns {
		o.Unknowns = append(o.Unknowns, u.Kind)
	}
	for _, a := range v.ACSRedirect {
		o.ACSRedirect = append(o.ACSRedirect, a.String())
	}
	if v.Fix != nil {
		o.KernelParam = v.Fix.KernelParam()
	}
	return o
}

func TestCalc(t *testing.T) {
	type pair struct {
		topo   *pcie.Topology
		p, c   *pcie.Device
		reason string // substring the reason must contain
	}
	sw := func(tb testing.TB, mod func(*switchTopo)) switchTopo {
		s := plainSwitch
		if mod != nil {
			mod(&s)
		}
		return s.build(tb)
	}
	tests := []struct {
		name  string
		plat  Platform
		setup func(tb testing.TB) pair
		want  outcome
	}{
		{
			name: "two endpoints under one switch",
			plat: intel,
			setup: func(tb testing.TB) pair {
				s := sw(tb, nil)
				return pair{s.t, s.ep0, s.ep1, "share upstream bridge 0000:01:00.0"}
			},
			want: outcome{MapType: BusAddr, Distance: 4},
		},
		{
			name: "ACS on both downstream ports, q35 host bridge",
			plat: intel,
			setup: func(tb testing.TB) pair {
				s := sw(tb, func(s *switchTopo) { s.dsp0ACS, s.dsp1ACS = acsIOMMU, acsIOMMU })
				return pair{s.t, s.ep0, s.ep1, "host bridge not in P2PDMA whitelist: 8086:29c0"}
			},
			want: outcome{MapType: NotSupported, Distance: 4, ACSRedirect: []string{"0000:02:00.0", "0000:02:01.0"},
				KernelParam: "pci=disable_acs_redir=0000:02:00.0;0000:02:01.0"},
		},
		{
			name: "ACS on both downstream ports, client and provider swapped",
			plat: intel,
			setup: func(tb testing.TB) pair {
				s := sw(tb, func(s *switchTopo) { s.dsp0ACS, s.dsp1ACS = acsIOMMU, acsIOMMU })
				return pair{s.t, s.ep1, s.ep0, "ACS redirect is set on 0000:02:01.0, 0000:02:00.0, between the client and provider"}
			},
			want: outcome{MapType: NotSupported, Distance: 4, ACSRedirect: []string{"0000:02:01.0", "0000:02:00.0"},
				KernelParam: "pci=disable_acs_redir=0000:02:01.0;0000:02:00.0"},
		},
		{
			name: "ACS on both downstream ports, AMD Zen",
			plat: amdZen,
			setup: func(tb testing.TB) pair {
				s := sw(tb, func(s *switchTopo) { s.dsp0ACS, s.dsp1ACS = acsIOMMU, acsIOMMU })
				return pair{s.t, s.ep0, s.ep1, "AMD Zen or newer"}
			},
			want: outcome{MapType: ThruHostBridge, Distance: 4, ACSRedirect: []string{"0000:02:00.0", "0000:02:01.0"},
				KernelParam: "pci=disable_acs_redir=0000:02:00.0;0000:02:01.0"},
		},
		{
			name: "ACS on both downstream ports, whitelisted Ice Lake host bridge",
			plat: intel,
			setup: func(tb testing.TB) pair {
				s := sw(tb, func(s *switchTopo) { s.dsp0ACS, s.dsp1ACS, s.hostID = acsIOMMU, acsIOMMU, idIceLake })
				return pair{s.t, s.ep0, s.ep1, "is in the P2PDMA whitelist"}
			},
			want: outcome{MapType: ThruHostBridge, Distance: 4, ACSRedirect: []string{"0000:02:00.0", "0000:02:01.0"},
				KernelParam: "pci=disable_acs_redir=0000:02:00.0;0000:02:01.0"},
		},
		{
			name: "EC only on one downstream port",
			plat: intel,
			setup: func(tb testing.TB) pair {
				s := sw(tb, func(s *switchTopo) { s.dsp0ACS, s.dsp1ACS = int(pcie.ACSEgressControl), 0 })
				return pair{s.t, s.ep0, s.ep1, "0000:02:00.0"}
			},
			want: outcome{MapType: NotSupported, Distance: 4, ACSRedirect: []string{"0000:02:00.0"},
				KernelParam: "pci=disable_acs_redir=0000:02:00.0"},
		},
		{
			name: "SV, TB, UF and DT are not redirect bits",
			plat: intel,
			setup: func(tb testing.TB) pair {
				s := sw(tb, func(s *switchTopo) { s.dsp0ACS, s.dsp1ACS = 0x0053, 0x0053 })
				return pair{s.t, s.ep0, s.ep1, "share upstream bridge"}
			},
			want: outcome{MapType: BusAddr, Distance: 4},
		},
		{
			name: "ACS on the root port above the common bridge is not checked",
			plat: intel,
			setup: func(tb testing.TB) pair {
				s := sw(tb, func(s *switchTopo) { s.rpACS = acsIOMMU })
				return pair{s.t, s.ep0, s.ep1, "share upstream bridge 0000:01:00.0"}
			},
			want: outcome{MapType: BusAddr, Distance: 4},
		},
		{
			name: "ACS on the common upstream port is checked",
			plat: intel,
			setup: func(tb testing.TB) pair {
				s := sw(tb, func(s *switchTopo) { s.uspACS = int(pcie.ACSRequestRedirect) })
				return pair{s.t, s.ep0, s.ep1, "0000:01:00.0"}
			},
			want: outcome{MapType: NotSupported, Distance: 4, ACSRedirect: []string{"0000:01:00.0"},
				KernelParam: "pci=disable_acs_redir=0000:01:00.0"},
		},
		{
			name: "ACS on the provider endpoint itself",
			plat: intel,
			setup: func(tb testing.TB) pair {
				s := sw(tb, func(s *switchTopo) { s.ep0ACS = int(pcie.ACSCompletionRedirect) })
				return pair{s.t, s.ep0, s.ep1, "0000:03:00.0"}
			},
			want: outcome{MapType: NotSupported, Distance: 4, ACSRedirect: []string{"0000:03:00.0"},
				KernelParam: "pci=disable_acs_redir=0000:03:00.0"},
		},
		{
			name: "ACS on the client endpoint itself",
			plat: intel,
			setup: func(tb testing.TB) pair {
				s := sw(tb, func(s *switchTopo) { s.ep0ACS = int(pcie.ACSCompletionRedirect) })
				return pair{s.t, s.ep1, s.ep0, "0000:03:00.0"}
			},
			want: outcome{MapType: NotSupported, Distance: 4, ACSRedirect: []string{"0000:03:00.0"},
				KernelParam: "pci=disable_acs_redir=0000:03:00.0"},
		},
		{
			name: "self pair",
			plat: intel,
			setup: func(tb testing.TB) pair {
				s := sw(tb, nil)
				return pair{s.t, s.ep0, s.ep0, "same function"}
			},
			want: outcome{MapType: BusAddr, Distance: 0},
		},
		{
			// The kernel checks the provider's own ACS before it finds that the
			// provider is the client, so a self pair with redirect set takes the
			// host-bridge path.
			name: "self pair with ACS redirect on the function",
			plat: intel,
			setup: func(tb testing.TB) pair {
				s := sw(tb, func(s *switchTopo) { s.ep0ACS = int(pcie.ACSRequestRedirect) })
				return pair{s.t, s.ep0, s.ep0, "not in P2PDMA whitelist"}
			},
			want: outcome{MapType: NotSupported, Distance: 0, ACSRedirect: []string{"0000:03:00.0"},
				KernelParam: "pci=disable_acs_redir=0000:03:00.0"},
		},
		{
			name: "Broadcom PEX switch with ACS on the downstream ports, Ice Lake",
			plat: intel,
			setup: func(tb testing.TB) pair {
				s := sw(tb, func(s *switchTopo) {
					s.switchID, s.hostID, s.epsID = idPEX, idIceLake, idH200
					s.dsp0ACS, s.dsp1ACS = acsIOMMU, acsIOMMU
				})
				return pair{s.t, s.ep0, s.ep1, "ACS redirect"}
			},
			want: outcome{MapType: ThruHostBridge, Distance: 4, ACSRedirect: []string{"0000:02:00.0", "0000:02:01.0"},
				KernelParam: "pci=disable_acs_redir=0000:02:00.0;0000:02:01.0"},
		},
		{
			name: "Broadcom PEX switch with ACS on the downstream ports, Hygon is not AMD",
			plat: hygon,
			setup: func(tb testing.TB) pair {
				s := sw(tb, func(s *switchTopo) {
					s.switchID, s.epsID = idPEX, idH200
					s.dsp0ACS, s.dsp1ACS = acsIOMMU, acsIOMMU
				})
				return pair{s.t, s.ep0, s.ep1, "not in P2PDMA whitelist"}
			},
			want: outcome{MapType: NotSupported, Distance: 4, ACSRedirect: []string{"0000:02:00.0", "0000:02:01.0"},
				KernelParam: "pci=disable_acs_redir=0000:02:00.0;0000:02:01.0"},
		},
		{
			name: "VFs of one PF",
			plat: intel,
			setup: func(tb testing.TB) pair {
				s := sw(tb, nil)
				v1 := s.vf(tb, s.ep0, "03:00.1")
				v2 := s.vf(tb, s.ep0, "03:00.2")
				return pair{s.t, v1, v2, "share upstream bridge 0000:02:00.0"}
			},
			want: outcome{MapType: BusAddr, Distance: 2},
		},
		{
			name: "VF and its PF",
			plat: intel,
			setup: func(tb testing.TB) pair {
				s := sw(tb, nil)
				v1 := s.vf(tb, s.ep0, "03:00.1")
				return pair{s.t, v1, s.ep0, "share upstream bridge 0000:02:00.0"}
			},
			want: outcome{MapType: BusAddr, Distance: 2},
		},
		{
			name: "VF and a device on the other downstream port",
			plat: intel,
			setup: func(tb testing.TB) pair {
				s := sw(tb, nil)
				v1 := s.vf(tb, s.ep0, "03:00.1")
				return pair{s.t, v1, s.ep1, "share upstream bridge 0000:01:00.0"}
			},
			want: outcome{MapType: BusAddr, Distance: 4},
		},
		{
			name: "VFs of one PF, ACS on the port above the PF",
			plat: intel,
			setup: func(tb testing.TB) pair {
				s := sw(tb, func(s *switchTopo) { s.dsp0ACS = acsIOMMU })
				v1 := s.vf(tb, s.ep0, "03:00.1")
				v2 := s.vf(tb, s.ep0, "03:00.2")
				return pair{s.t, v1, v2, "0000:02:00.0"}
			},
			want: outcome{MapType: NotSupported, Distance: 2, ACSRedirect: []string{"0000:02:00.0"},
				KernelParam: "pci=disable_acs_redir=0000:02:00.0"},
		},
		{
			name: "different root ports, Ice Lake 09a2",
			plat: intel,
			setup: func(tb testing.TB) pair {
				r := buildTwoRootPorts(tb, idIceLake, idIceLake, acsIOMMU)
				return pair{r.t, r.ep0, r.ep1, "do not share an upstream bridge; the traffic goes through the host bridge"}
			},
			want: outcome{MapType: ThruHostBridge, Distance: 4},
		},
		{
			name: "different root ports, Ice Lake 09a2 before 5.18",
			plat: withKernel(intel, 5, 15),
			setup: func(tb testing.TB) pair {
				r := buildTwoRootPorts(tb, idIceLake, idIceLake, noACS)
				return pair{r.t, r.ep0, r.ep1, "host bridge not in P2PDMA whitelist: 8086:09a2"}
			},
			want: outcome{MapType: NotSupported, Distance: 4},
		},
		{
			name: "different root ports, q35",
			plat: intel,
			setup: func(tb testing.TB) pair {
				r := buildTwoRootPorts(tb, idQ35Host, idQ35Host, noACS)
				return pair{r.t, r.ep0, r.ep1, "host bridge not in P2PDMA whitelist: 8086:29c0"}
			},
			want: outcome{MapType: NotSupported, Distance: 4},
		},
		{
			name: "different root ports, q35, AMD Zen",
			plat: amdZen,
			setup: func(tb testing.TB) pair {
				r := buildTwoRootPorts(tb, idQ35Host, idQ35Host, noACS)
				return pair{r.t, r.ep0, r.ep1, "AMD Zen"}
			},
			want: outcome{MapType: ThruHostBridge, Distance: 4},
		},
		{
			name: "across host bridges, q35, AMD Zen",
			plat: amdZen,
			setup: func(tb testing.TB) pair {
				r := buildTwoRootPorts(tb, idQ35Host, idQ35Host, noACS)
				return pair{r.t, r.ep0, r.epFar, "AMD Zen"}
			},
			want: outcome{MapType: ThruHostBridge, Distance: 4},
		},
		{
			name: "different root ports, q35, AMD before Zen",
			plat: amdOld,
			setup: func(tb testing.TB) pair {
				r := buildTwoRootPorts(tb, idQ35Host, idQ35Host, noACS)
				return pair{r.t, r.ep0, r.ep1, "not in P2PDMA whitelist"}
			},
			want: outcome{MapType: NotSupported, Distance: 4},
		},
		{
			name: "Xeon E5 3c00 within one host bridge",
			plat: intel,
			setup: func(tb testing.TB) pair {
				r := buildTwoRootPorts(tb, idXeonE5, idXeonE5, noACS)
				return pair{r.t, r.ep0, r.ep1, "Intel Xeon E5/Core i7"}
			},
			want: outcome{MapType: ThruHostBridge, Distance: 4},
		},
		{
			name: "Xeon E5 3c00 across host bridges",
			plat: intel,
			setup: func(tb testing.TB) pair {
				r := buildTwoRootPorts(tb, idXeonE5, idXeonE5, noACS)
				return pair{r.t, r.ep0, r.epFar, "requires both functions below the same host bridge"}
			},
			want: outcome{MapType: NotSupported, Distance: 4},
		},
		{
			name: "Ice Lake across host bridges",
			plat: intel,
			setup: func(tb testing.TB) pair {
				r := buildTwoRootPorts(tb, idIceLake, idIceLake, noACS)
				return pair{r.t, r.ep0, r.epFar, "host bridge pci0000:80 is in the P2PDMA whitelist"}
			},
			want: outcome{MapType: ThruHostBridge, Distance: 4},
		},
		{
			name: "across host bridges, only one whitelisted",
			plat: intel,
			setup: func(tb testing.TB) pair {
				r := buildTwoRootPorts(tb, idIceLake, idQ35Host, noACS)
				return pair{r.t, r.ep0, r.epFar, "not in P2PDMA whitelist: 8086:29c0"}
			},
			want: outcome{MapType: NotSupported, Distance: 4},
		},
		{
			name: "first root-bus function neither 00.0 nor a Root Port",
			plat: intel,
			setup: func(tb testing.TB) pair {
				b := newBuilder()
				h := b.host(0, 0x40)
				b.fn(tb, h, nil, "40:02.0", idIceLake, pcie.PortRCiEP, noACS)
				rp1 := b.fn(tb, h, nil, "40:03.0", idQEMURP, pcie.PortRootPort, noACS)
				rp2 := b.fn(tb, h, nil, "40:04.0", idQEMURP, pcie.PortRootPort, noACS)
				e1 := b.fn(tb, h, rp1, "41:00.0", idNVMe, pcie.PortEndpoint, noACS)
				e2 := b.fn(tb, h, rp2, "42:00.0", idNVMe, pcie.PortEndpoint, noACS)
				return pair{b.t, e1, e2, "neither 00.0 nor a Root Port"}
			},
			want: outcome{MapType: NotSupported, Distance: 4},
		},
		{
			name: "first root-bus function a whitelisted Root Port at 01.0",
			plat: intel,
			setup: func(tb testing.TB) pair {
				b := newBuilder()
				h := b.host(0, 0x40)
				rp1 := b.fn(tb, h, nil, "40:01.0", idSkylakeRPA, pcie.PortRootPort, noACS)
				rp2 := b.fn(tb, h, nil, "40:02.0", idQEMURP, pcie.PortRootPort, noACS)
				e1 := b.fn(tb, h, rp1, "41:00.0", idNVMe, pcie.PortEndpoint, noACS)
				e2 := b.fn(tb, h, rp2, "42:00.0", idNVMe, pcie.PortEndpoint, noACS)
				return pair{b.t, e1, e2, "Skylake-E root port A"}
			},
			want: outcome{MapType: ThruHostBridge, Distance: 4},
		},
		{
			name: "first root-bus function at 01.0 with unknown port type",
			plat: intel,
			setup: func(tb testing.TB) pair {
				b := newBuilder()
				h := b.host(0, 0x40)
				rp1 := b.fn(tb, h, nil, "40:01.0", idSkylakeRPA, pcie.PortRootPort, noACS)
				rp2 := b.fn(tb, h, nil, "40:02.0", idQEMURP, pcie.PortRootPort, noACS)
				e1 := b.fn(tb, h, rp1, "41:00.0", idNVMe, pcie.PortEndpoint, noACS)
				e2 := b.fn(tb, h, rp2, "42:00.0", idNVMe, pcie.PortEndpoint, noACS)
				unread(rp1)
				return pair{b.t, e1, e2, "port type of 0000:40:01.0"}
			},
			want: outcome{MapType: Unknown, Distance: 4, Unknowns: []UnknownKind{PortTypeUnread}},
		},
		{
			name: "first root-bus function at 01.0 without a PCI Express capability",
			plat: intel,
			setup: func(tb testing.TB) pair {
				b := newBuilder()
				h := b.host(0, 0x40)
				first := b.fn(tb, h, nil, "40:01.0", idSkylakeRPA, pcie.PortRootPort, noACS)
				first.Config.Express = nil
				rp2 := b.fn(tb, h, nil, "40:02.0", idQEMURP, pcie.PortRootPort, noACS)
				rp3 := b.fn(tb, h, nil, "40:03.0", idQEMURP, pcie.PortRootPort, noACS)
				e1 := b.fn(tb, h, rp2, "41:00.0", idNVMe, pcie.PortEndpoint, noACS)
				e2 := b.fn(tb, h, rp3, "42:00.0", idNVMe, pcie.PortEndpoint, noACS)
				return pair{b.t, e1, e2, "neither 00.0 nor a Root Port"}
			},
			want: outcome{MapType: NotSupported, Distance: 4},
		},
		{
			name: "unknown ACS on both downstream ports",
			plat: intel,
			setup: func(tb testing.TB) pair {
				s := sw(tb, nil)
				unread(s.dsp0)
				unread(s.dsp1)
				return pair{s.t, s.ep0, s.ep1, "ACS Control of 0000:02:00.0, which was not read"}
			},
			want: outcome{MapType: Unknown, Distance: 4, Unknowns: []UnknownKind{ACSUnread, ACSUnread}},
		},
		{
			name: "unknown ACS on one port, redirect on the other",
			plat: intel,
			setup: func(tb testing.TB) pair {
				s := sw(tb, func(s *switchTopo) { s.dsp0ACS = acsIOMMU })
				unread(s.dsp1)
				return pair{s.t, s.ep0, s.ep1, "not in P2PDMA whitelist"}
			},
			want: outcome{MapType: NotSupported, Distance: 4, ACSRedirect: []string{"0000:02:00.0"},
				KernelParam: "pci=disable_acs_redir=0000:02:00.0", Unknowns: []UnknownKind{ACSUnread}},
		},
		{
			name: "256 bytes of config space: the kernel has no extended space either",
			plat: intel,
			setup: func(tb testing.TB) pair {
				s := sw(tb, nil)
				for _, d := range []*pcie.Device{s.dsp0, s.dsp1, s.usp, s.ep0, s.ep1} {
					d.Config.Size, d.Config.ExtCapsKnown = 256, false
				}
				return pair{s.t, s.ep0, s.ep1, "share upstream bridge"}
			},
			want: outcome{MapType: BusAddr, Distance: 4},
		},
		{
			name: "unknown ACS above the common bridge does not matter",
			plat: intel,
			setup: func(tb testing.TB) pair {
				s := sw(tb, nil)
				unread(s.rp)
				unread(s.hostDev)
				return pair{s.t, s.ep0, s.ep1, "share upstream bridge"}
			},
			want: outcome{MapType: BusAddr, Distance: 4},
		},
		{
			name: "unknown ACS without a common bridge does not matter",
			plat: intel,
			setup: func(tb testing.TB) pair {
				r := buildTwoRootPorts(tb, idIceLake, idIceLake, noACS)
				for _, d := range r.t.Devices[1:] {
					unread(d)
				}
				return pair{r.t, r.ep0, r.ep1, "do not share an upstream bridge"}
			},
			want: outcome{MapType: ThruHostBridge, Distance: 4},
		},
		{
			name: "QAT root bus before 7.1",
			plat: intel,
			setup: func(tb testing.TB) pair {
				r := buildTwoRootPorts(tb, idQAT4xxx, idQAT4xxx, noACS)
				return pair{r.t, r.ep0, r.ep1, "not in P2PDMA whitelist: 8086:4940"}
			},
			want: outcome{MapType: NotSupported, Distance: 4},
		},
		{
			name: "QAT root bus in 7.1 (backport not known)",
			plat: withKernel(intel, 7, 1),
			setup: func(tb testing.TB) pair {
				r := buildTwoRootPorts(tb, idQAT4xxx, idQAT4xxx, noACS)
				return pair{r.t, r.ep0, r.ep1, "from Linux 7.2 on"}
			},
			want: outcome{MapType: Unknown, Distance: 4, Unknowns: []UnknownKind{WhitelistVersion}},
		},
		{
			name: "QAT root bus in 7.2",
			plat: withKernel(intel, 7, 2),
			setup: func(tb testing.TB) pair {
				r := buildTwoRootPorts(tb, idQAT4xxx, idQAT4xxx, noACS)
				return pair{r.t, r.ep0, r.ep1, "Intel DSA/IAA/QAT"}
			},
			want: outcome{MapType: ThruHostBridge, Distance: 4},
		},
		{
			name: "QAT root bus, kernel unknown",
			plat: withKernel(intel, 0, 0),
			setup: func(tb testing.TB) pair {
				r := buildTwoRootPorts(tb, idQAT4xxx, idQAT4xxx, noACS)
				return pair{r.t, r.ep0, r.ep1, "kernel unknown"}
			},
			want: outcome{MapType: Unknown, Distance: 4, Unknowns: []UnknownKind{WhitelistVersion}},
		},
		{
			name: "Zhaoxin across host bridges, 7.4",
			plat: withKernel(intel, 7, 4),
			setup: func(tb testing.TB) pair {
				r := buildTwoRootPorts(tb, idZhaoxin, idZhaoxin, noACS)
				return pair{r.t, r.ep0, r.epFar, "requires both functions below the same host bridge"}
			},
			want: outcome{MapType: NotSupported, Distance: 4},
		},
		{
			name: "Zhaoxin within one host bridge, 7.4",
			plat: withKernel(intel, 7, 4),
			setup: func(tb testing.TB) pair {
				r := buildTwoRootPorts(tb, idZhaoxin, idZhaoxin, noACS)
				return pair{r.t, r.ep0, r.ep1, "Zhaoxin"}
			},
			want: outcome{MapType: ThruHostBridge, Distance: 4},
		},
		{
			name: "endpoints on the root bus",
			plat: intel,
			setup: func(tb testing.TB) pair {
				b := newBuilder()
				h := b.host(0, 0)
				b.fn(tb, h, nil, "00:00.0", idQ35Host, pcie.PortRCiEP, noACS)
				g0 := b.fn(tb, h, nil, "00:06.0", idH200, pcie.PortEndpoint, noACS)
				g1 := b.fn(tb, h, nil, "00:07.0", idH200, pcie.PortEndpoint, noACS)
				return pair{b.t, g0, g1, "do not share an upstream bridge"}
			},
			want: outcome{MapType: NotSupported, Distance: 2},
		},
		{
			name: "kernel 5.4: a common bridge without redirect is still bus-addr",
			plat: withKernel(intel, 5, 4),
			setup: func(tb testing.TB) pair {
				s := sw(tb, nil)
				return pair{s.t, s.ep0, s.ep1, "share upstream bridge"}
			},
			want: outcome{MapType: BusAddr, Distance: 4},
		},
		{
			name: "kernel 5.4: host-bridge rules not modelled",
			plat: withKernel(amdZen, 5, 4),
			setup: func(tb testing.TB) pair {
				r := buildTwoRootPorts(tb, idIceLake, idIceLake, noACS)
				return pair{r.t, r.ep0, r.ep1, "older than 5.9"}
			},
			want: outcome{MapType: Unknown, Distance: 4, Unknowns: []UnknownKind{OldKernelRules}},
		},
		{
			name: "kernel 4.19 has no P2PDMA",
			plat: withKernel(intel, 4, 19),
			setup: func(tb testing.TB) pair {
				s := sw(tb, nil)
				return pair{s.t, s.ep0, s.ep1, "no PCI P2PDMA"}
			},
			want: outcome{MapType: NotSupported, Distance: -1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pr := tt.setup(t)
			got := NewCalculator(pr.topo, tt.plat).Calc(pr.p, pr.c)
			if diff := cmp.Diff(tt.want, project(got)); diff != "" {
				t.Errorf("verdict mismatch (-want +got):\n%s\nreason: %s", diff, got.Reason)
			}
			if !strings.Contains(got.Reason, pr.reason) {
				t.Errorf("reason %q does not contain %q", got.Reason, pr.reason)
			}
			if got.Provider != pr.p.Address || got.Client != pr.c.Address {
				t.Errorf("addresses = %v, %v; want %v, %v", got.Provider, got.Client, pr.p.Address, pr.c.Address)
			}
			// The one-shot Calc must agree with the Calculator.
			if diff := cmp.Diff(got, Calc(pr.topo, tt.plat, pr.p, pr.c)); diff != "" {
				t.Errorf("Calc differs from Calculator.Calc (-calculator +calc):\n%s", diff)
			}
		})
	}
}

func TestFix(t *testing.T) {
	s := plainSwitch
	s.dsp0ACS, s.dsp1ACS = acsIOMMU|int(pcie.ACSEgressControl), int(pcie.ACSRequestRedirect)
	s = s.build(t)
	got := NewCalculator(s.t, intel).Calc(s.ep0, s.ep1).Fix
	if diff := cmp.Diff(&Fix{Bridges: []pcie.Address{s.dsp0.Address, s.dsp1.Address}}, got); diff != "" {
		t.Fatalf("Fix mismatch (-want +got):\n%s", diff)
	}
	if got, want := got.KernelParam(), "pci=disable_acs_redir=0000:02:00.0;0000:02:01.0"; got != want {
		t.Errorf("KernelParam() = %q, want %q", got, want)
	}
	wantSetpci := []string{
		"setpci -s 0000:02:00.0 ECAP_ACS+6.w=0000:002c",
		"setpci -s 0000:02:01.0 ECAP_ACS+6.w=0000:002c",
	}
	if diff := cmp.Diff(wantSetpci, got.Setpci()); diff != "" {
		t.Errorf("Setpci() mismatch (-want +got):\n%s", diff)
	}
	if want := fmt.Sprintf("ECAP_ACS+6.w=0000:%04x", acsRedirectMask); SetpciClearArgs != want {
		t.Errorf("SetpciClearArgs = %q, want the redirect mask %q", SetpciClearArgs, want)
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON := `{"kernel_param":"pci=disable_acs_redir=0000:02:00.0;0000:02:01.0","setpci":["setpci -s 0000:02:00.0 ECAP_ACS+6.w=0000:002c","setpci -s 0000:02:01.0 ECAP_ACS+6.w=0000:002c"]}`
	if string(b) != wantJSON {
		t.Errorf("JSON = %s, want %s", b, wantJSON)
	}
	// No fix when ACS is not the cause.
	r := buildTwoRootPorts(t, idQ35Host, idQ35Host, acsIOMMU)
	if f := NewCalculator(r.t, intel).Calc(r.ep0, r.ep1).Fix; f != nil {
		t.Errorf("Fix = %+v for a pair without a common bridge; want nil", f)
	}
}

func TestCalcNotInTopology(t *testing.T) {
	s := plainSwitch.build(t)
	c := NewCalculator(s.t, intel)
	stray := &pcie.Device{Record: pcie.Record{Address: pcie.Address{Bus: 9}}}
	v := c.Calc(s.ep0, stray)
	if v.MapType != Unknown || len(v.Unknowns) != 1 || !v.HasUnknown(NotInTopology) {
		t.Errorf("Calc with a stray client = %v, unknowns %q; want unknown with a reason", v.MapType, v.Unknowns)
	}
}

func TestCalcLoop(t *testing.T) {
	b := newBuilder()
	h := b.host(0, 0)
	x := b.fn(t, h, nil, "00:01.0", idQEMURP, pcie.PortRootPort, noACS)
	y := b.fn(t, h, x, "01:00.0", idTIUp, pcie.PortUpstream, noACS)
	x.Parent = y // a broken tree
	z := b.fn(t, h, nil, "00:02.0", idNVMe, pcie.PortEndpoint, noACS)
	v := NewCalculator(b.t, intel).Calc(y, z)
	if v.MapType != Unknown || !v.HasUnknown(TreeLoop) {
		t.Errorf("verdict over a looped tree = %v, unknowns %q; want unknown, the tree has a loop", v.MapType, v.Unknowns)
	}
}

func TestCommon(t *testing.T) {
	s := plainSwitch.build(t)
	r := buildTwoRootPorts(t, idIceLake, idIceLake, noACS)
	v := s.vf(t, s.ep0, "03:00.1")
	str := func(a *pcie.Address) string {
		if a == nil {
			return "none"
		}
		return a.String()
	}
	cs, cr := NewCalculator(s.t, intel), NewCalculator(r.t, intel)
	got := []string{
		str(cs.Calc(s.ep0, s.ep1).Common),
		str(cs.Calc(s.ep0, s.ep0).Common),
		str(cs.Calc(v, s.ep0).Common),
		str(cs.Calc(s.ep0, s.usp).Common),
		str(cr.Calc(r.ep0, r.ep1).Common),
	}
	want := []string{"0000:01:00.0", "0000:03:00.0", "0000:02:00.0", "0000:01:00.0", "none"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("common bridges (-want +got):\n%s", diff)
	}
}
