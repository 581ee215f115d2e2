package p2pdma

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/p2pkit/p2pkit/kversion"
	"github.com/p2pkit/p2pkit/pcie"
)

// randomTree builds a random machine: one to three host bridges whose first
// function is a host device or a root port, whitelisted or not, with root ports,
// switches (nested up to three deep), multifunction endpoints, VFs, and ACS Control
// drawn from the values real machines have. Some functions are read without root.
func randomTree(tb testing.TB, r *rand.Rand) *pcie.Topology {
	b := newBuilder()
	hostIDs := []uint32{idQ35Host, idIceLake, idXeonE5, idSkylakeRPA, idQAT4xxx, idZhaoxin}
	acsValues := []int{noACS, noACS, 0, 0x1d, 0x11, 0x20, 0x5f}
	acs := func() int { return acsValues[r.IntN(len(acsValues))] }
	bus := 0
	newBus := func() int { bus++; return bus }
	var endpoints func(h *pcie.HostBridge, parent *pcie.Device, busNr, depth int)
	var fn = func(h *pcie.HostBridge, parent *pcie.Device, busNr, dev, f int, id uint32, pt pcie.PortType, acs int) *pcie.Device {
		d := b.fn(tb, h, parent, fmt.Sprintf("%04x:%02x:%02x.%x", h.Domain, busNr, dev, f), id, pt, acs)
		if r.IntN(12) == 0 {
			unread(d)
		}
		return d
	}
	endpoints = func(h *pcie.HostBridge, parent *pcie.Device, busNr, depth int) {
		switch k := r.IntN(4); {
		case k == 0 && depth < 3: // a switch
			usp := fn(h, parent, busNr, 0, 0, idPEX, pcie.PortUpstream, acs())
			inner := newBus()
			for i := range 1 + r.IntN(3) {
				dsp := fn(h, usp, inner, i, 0, idPEX, pcie.PortDownstream, acs())
				endpoints(h, dsp, newBus(), depth+1)
			}
		default: // a device with one to three functions, perhaps with VFs
			for f := range 1 + r.IntN(3) {
				ep := fn(h, parent, busNr, 0, f, idNVMe, pcie.PortEndpoint, acs())
				if r.IntN(5) == 0 {
					b.vf(tb, ep, fmt.Sprintf("%04x:%02x:%02x.%x", h.Domain, busNr, 1+f, 0))
				}
			}
		}
	}
	for hi := range 1 + r.IntN(3) {
		h := b.host(uint32(hi), 0)
		id := hostIDs[r.IntN(len(hostIDs))]
		if r.IntN(4) == 0 {
			// The first function is a root port at 00:01.0 (pci_host_bridge_dev()).
			fn(h, nil, 0, 1, 0, id, pcie.PortRootPort, acs())
		} else {
			fn(h, nil, 0, 0, 0, id, pcie.PortRCiEP, noACS)
		}
		for rp := range 1 + r.IntN(3) {
			port := fn(h, nil, 0, 2+rp, 0, idQEMURP, pcie.PortRootPort, acs())
			endpoints(h, port, newBus(), 0)
		}
		if r.IntN(3) == 0 {
			fn(h, nil, 0, 0x10, 0, idNVMe, pcie.PortRCiEP, acs()) // an RCiEP
		}
	}
	return b.t
}

// TestReferenceMatchesCalculator checks on random trees that the tuned Calculator and
// the readable port of calc_map_type_and_dist() give every ordered pair, self pairs
// included, the same map type and distance, and that the Calculator says Unknown
// exactly where the port finds a fact missing.
func TestReferenceMatchesCalculator(t *testing.T) {
	kernels := []kversion.Version{{}, {Major: 5, Minor: 9}, {Major: 5, Minor: 17}, {Major: 5, Minor: 18}, {Major: 6, Minor: 1}, {Major: 6, Minor: 12}, {Major: 7, Minor: 1}, {Major: 7, Minor: 2}, {Major: 7, Minor: 4}}
	cpus := []Platform{
		{CPUVendor: "GenuineIntel", CPUFamily: 6},
		{CPUVendor: "AuthenticAMD", CPUFamily: 0x17},
		{CPUVendor: "AuthenticAMD", CPUFamily: 0x19},
		{CPUVendor: "AuthenticAMD", CPUFamily: 0x15},
		{CPUVendor: "HygonGenuine", CPUFamily: 0x18},
		{},
	}
	r := rand.New(rand.NewPCG(13, 14))
	pairs, counts := 0, map[MapType]int{}
	for i := range 300 {
		topo := randomTree(t, r)
		plat := cpus[r.IntN(len(cpus))]
		plat.Kernel = kernels[r.IntN(len(kernels))]
		calc := NewCalculator(topo, plat)
		for _, p := range topo.Devices {
			for _, q := range topo.Devices {
				v := calc.Calc(p, q)
				mt, dist, ok := referenceCalc(plat, p, q)
				pairs++
				counts[v.MapType]++
				switch {
				case !ok && v.MapType != Unknown:
					t.Fatalf("tree %d, %+v: %s -> %s: the port finds a fact missing, the Calculator says %s %d (%s)",
						i, plat, p.Address, q.Address, v.MapType, v.Distance, v.Reason)
				case ok && (mt != v.MapType || dist != v.Distance):
					t.Fatalf("tree %d, %+v: %s -> %s: port %s %d, Calculator %s %d (%s)",
						i, plat, p.Address, q.Address, mt, dist, v.MapType, v.Distance, v.Reason)
				}
			}
		}
	}
	// The trees must exercise every outcome, or the test proves little.
	for _, m := range []MapType{BusAddr, ThruHostBridge, NotSupported, Unknown} {
		if counts[m] == 0 {
			t.Errorf("no pair came out %s in %d pairs", m, pairs)
		}
	}
	t.Logf("%d pairs: %v", pairs, counts)
}
