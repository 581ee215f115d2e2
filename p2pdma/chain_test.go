package p2pdma

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/kversion"
	"github.com/p2pkit/p2pkit/pcie"
)

// chainVerdict is the verdict calc_map_type_and_dist() gives, computed the direct
// way: both chains built by walking pci_upstream_bridge() (at most maxChain steps),
// the client's searched for each function of the provider's, ACS redirect counted
// along both segments, then CheckComplete's and the impossible-tree walks made one
// function at a time. It is the Calculator before its chains became a forest, kept
// to test that the fast path gives every verdict field for field.
func chainVerdict(c *Calculator, provider, client *pcie.Device) Verdict {
	chain := func(d *pcie.Device) (out []*pcie.Device, loop bool) {
		for x := d; x != nil; x = x.Upstream() {
			if len(out) == maxChain {
				return out, true
			}
			out = append(out, x)
		}
		return out, false
	}
	info := func(d *pcie.Device) *devInfo { return &c.devs[c.index[d]] }
	p, q := info(provider), info(client)
	v := Verdict{Provider: p.addr, Client: q.addr, ACSRedirect: noRedirect}
	if k := c.plat.Kernel; !k.IsZero() && k.Compare(kernelFirstP2PDMA) < 0 {
		return c.Calc(provider, client) // no chain involved
	}
	pc, ploop := chain(provider)
	qc, qloop := chain(client)
	var common *pcie.Device
	for da, a := range pc {
		for db, b := range qc {
			if a != b {
				continue
			}
			common = a
			v = chainCommon(c, v, pc[:da+1], qc[:db], p, q)
			v.Distance = da + db
			v.Common = &info(a).addr
		}
		if common != nil {
			break
		}
	}
	if common == nil {
		v.Distance = len(pc) + len(qc)
		c.noCommonVerdict(&v, ploop || qloop, p, q)
	}
	// The walks up to the common bridge (exclusive), or the whole chains.
	walk := func(ch []*pcie.Device, kind func(*pcie.Device) bool) *pcie.Device {
		for _, x := range ch {
			if x == common {
				return nil
			}
			if o := linkOwnerOf(x); kind(o) {
				return o
			}
		}
		return nil
	}
	for _, ch := range [][]*pcie.Device{pc, qc} {
		if o := walk(ch, func(d *pcie.Device) bool { return d.BelowEndpoint }); o != nil {
			u := UnknownFact{Kind: TreeImpossible, Device: &o.Address}
			v.MapType, v.Fix = Unknown, nil
			v.Reason = "the kernel cannot build this tree: " + u.String() + "; so there is no kernel verdict to mirror"
			v.Unknowns = append(v.Unknowns, u)
			break
		}
	}
	if v.MapType == Unknown {
		return v
	}
	for _, ch := range [][]*pcie.Device{pc, qc} {
		if o := walk(ch, func(d *pcie.Device) bool { return d.PathIncomplete }); o != nil {
			u := UnknownFact{Kind: ParentUnknown, Device: &o.Address}
			v.MapType, v.Fix = Unknown, nil
			v.Reason = u.String() + ": the kernel's walk would cross the missing bridges"
			v.Unknowns = append(v.Unknowns, u)
			break
		}
	}
	return v
}

func linkOwnerOf(d *pcie.Device) *pcie.Device {
	if d.PF != nil {
		return d.PF
	}
	return d
}

// chainCommon checks the provider's segment (the common bridge included) and the
// client's for ACS redirect, in the kernel's order.
func chainCommon(c *Calculator, v Verdict, provSide, clientSide []*pcie.Device, p, q *devInfo) Verdict {
	info := func(d *pcie.Device) *devInfo { return &c.devs[c.index[d]] }
	top := info(provSide[len(provSide)-1])
	var redirect []*devInfo
	for _, s := range [2][]*pcie.Device{provSide, clientSide} {
		for _, x := range s {
			switch d := info(x); d.redir {
			case yes:
				redirect = append(redirect, d)
			case maybe:
				v.Unknowns = append(v.Unknowns, UnknownFact{Kind: ACSUnread, Device: &d.addr})
			}
		}
	}
	switch {
	case len(redirect) == 0 && len(v.Unknowns) == 0:
		v.MapType = BusAddr
		v.Reason = top.busReason
		if p == q {
			v.Reason = selfReason
		}
	case len(redirect) == 0:
		v.MapType = Unknown
		v.Reason = info(provSide[0]).acsNotRead
		for _, s := range [2][]*pcie.Device{provSide, clientSide} {
			for _, x := range s {
				if d := info(x); d.redir == maybe {
					v.Reason = d.acsNotRead
					return v
				}
			}
		}
	default:
		var names []string
		v.ACSRedirect = nil
		for _, d := range redirect {
			v.ACSRedirect = append(v.ACSRedirect, d.addr)
			names = append(names, d.bdf)
		}
		v.Fix = &Fix{Bridges: v.ACSRedirect}
		why := fmt.Sprintf("ACS redirect is set on %s, between the client and provider, so the kernel treats "+
			"the path as one through the root complex", strings.Join(names, ", "))
		out := c.noHost
		if p.hb >= 0 && q.hb >= 0 {
			out = c.hostCase(p.hb, q.hb, why)
		}
		v.MapType, v.Reason = out.mapType, out.text
		if out.unknown.Kind != 0 {
			v.Unknowns = append(v.Unknowns, out.unknown)
		}
	}
	return v
}

// deepTree is a chain of n bridges, some with ACS redirect set or unread, with an
// endpoint or two below every few, deeper than maxChain when n is: the kernel's walk
// then stops before the chain's end.
func deepTree(tb testing.TB, r *rand.Rand, n int) *pcie.Topology {
	b := newBuilder()
	h := b.host(0, 0)
	b.fn(tb, h, nil, "0000:00:00.0", idIceLake, pcie.PortRCiEP, noACS)
	acsValues := []int{noACS, noACS, noACS, 0, 0x1d, 0x20}
	var parent *pcie.Device
	for i := range n {
		d := b.fn(tb, h, parent, fmt.Sprintf("%04x:%02x:00.0", i>>8, i&0xff), idPEX, pcie.PortDownstream, acsValues[r.IntN(len(acsValues))])
		if r.IntN(10) == 0 {
			unread(d)
		}
		if r.IntN(4) == 0 {
			ep := b.fn(tb, h, d, fmt.Sprintf("%04x:%02x:01.0", i>>8, i&0xff), idNVMe, pcie.PortEndpoint, noACS)
			if r.IntN(3) == 0 {
				b.vf(tb, ep, fmt.Sprintf("%04x:%02x:01.1", i>>8, i&0xff))
			}
		}
		parent = d
	}
	return b.t
}

// TestCalculatorMatchesChains: on random trees (the reference test's, and chains
// deeper than maxChain), with functions of unknown parent and functions below
// endpoints sprinkled in, the Calculator gives every ordered pair, self pairs
// included, the verdict the direct chain walk gives, field for field, and
// CheckComplete agrees with the walk too.
func TestCalculatorMatchesChains(t *testing.T) {
	kernels := []kversion.Version{{}, {Major: 5, Minor: 9}, {Major: 6, Minor: 12}}
	cpus := []Platform{{CPUVendor: "GenuineIntel", CPUFamily: 6}, {CPUVendor: "AuthenticAMD", CPUFamily: 0x19}, {}}
	r := rand.New(rand.NewPCG(21, 22))
	pairs, counts := 0, map[MapType]int{}
	for i := range 150 {
		topo := randomTree(t, r)
		if i%15 == 0 {
			topo = deepTree(t, r, 200+r.IntN(200))
		}
		for _, d := range topo.Devices {
			switch r.IntN(40) {
			case 0:
				d.PathIncomplete = true
			case 1:
				d.BelowEndpoint = true
			}
		}
		plat := cpus[r.IntN(len(cpus))]
		plat.Kernel = kernels[r.IntN(len(kernels))]
		calc := NewCalculator(topo, plat)
		for _, p := range topo.Devices {
			for _, q := range topo.Devices {
				if len(topo.Devices) > 100 && r.IntN(1000) > 0 {
					continue // a sample of the deep trees' pairs
				}
				got := calc.CheckComplete(calc.Calc(p, q), p, q)
				want := chainVerdict(calc, p, q)
				pairs++
				counts[got.MapType]++
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("tree %d, %+v: %s -> %s (-chains +calculator):\n%s", i, plat, p.Address, q.Address, diff)
				}
			}
		}
	}
	for _, m := range []MapType{BusAddr, ThruHostBridge, NotSupported, Unknown} {
		if counts[m] == 0 {
			t.Errorf("no pair came out %s in %d pairs", m, pairs)
		}
	}
}

// TestCalculatorDeepChainCost: on a chain of 256 bridges with unread ACS, as deep as
// PCI allows, a pair of the endpoints at its two ends costs no walk of the chains:
// the verdict allocates only its list of unknowns, and a bus-addr verdict nothing.
func TestCalculatorDeepChainCost(t *testing.T) {
	b := newBuilder()
	h := b.host(0, 0)
	var parent *pcie.Device
	var eps []*pcie.Device
	for i := range 256 {
		d := b.fn(t, h, parent, fmt.Sprintf("%04x:%02x:00.0", i>>8, i&0xff), idPEX, pcie.PortDownstream, noACS)
		eps = append(eps, b.fn(t, h, d, fmt.Sprintf("%04x:%02x:01.0", i>>8, i&0xff), idNVMe, pcie.PortEndpoint, noACS))
		parent = d
	}
	calc := NewCalculator(b.t, intel)
	top, bottom := eps[1], eps[255]
	if v := calc.Calc(bottom, top); v.MapType != BusAddr || v.Distance != 256 {
		t.Fatalf("verdict %s %d, want bus-addr 256", v.MapType, v.Distance)
	}
	if allocs := testing.AllocsPerRun(100, func() { calc.CheckComplete(calc.Calc(bottom, top), bottom, top) }); allocs != 0 {
		t.Errorf("a bus-addr pair across 256 bridges allocates %v times, want 0", allocs)
	}
}

// TestImpossibleTree: a GPU below a GPU, and a NIC below a bridge below an NVMe
// controller, as a crafted snapshot lays them out. The kernel cannot build such a
// tree, so no pair whose walk crosses a function below an endpoint gets a confident
// verdict (bus-addr, distance 1 for the two GPUs before); pairs that avoid those
// links keep the kernel's answer.
func TestImpossibleTree(t *testing.T) {
	gpu := make([]byte, 256)
	copy(gpu, []byte{0xde, 0x10, 0x35, 0x23})
	gpu[0x0a], gpu[0x0b] = 0x02, 0x03
	nvme := make([]byte, 256)
	copy(nvme, []byte{0x4d, 0x14, 0x24, 0xa8})
	nvme[0x09], nvme[0x0a], nvme[0x0b] = 0x02, 0x08, 0x01
	bridge := make([]byte, 256)
	copy(bridge, []byte{0x00, 0x10, 0x30, 0xc0})
	bridge[0x0a], bridge[0x0b], bridge[0x0e] = 0x04, 0x06, 1
	rec := func(path string, class uint32, cfg []byte) pcie.Record {
		a, err := pcie.ParseAddress(path[strings.LastIndexByte(path, '/')+1:])
		if err != nil {
			t.Fatal(err)
		}
		return pcie.Record{Address: a, Path: path, Class: class, Config: cfg}
	}
	topo := pcie.NewTopology([]pcie.Record{
		rec("pci0000:00/0000:00:01.0", 0x030200, gpu),
		rec("pci0000:00/0000:00:01.0/0000:01:00.0", 0x030200, gpu),
		rec("pci0000:00/0000:00:02.0", 0x010802, nvme),
		rec("pci0000:00/0000:00:02.0/0000:02:00.0", 0x060400, bridge),
		rec("pci0000:00/0000:00:02.0/0000:02:00.0/0000:03:00.0", 0x020000, nil),
		rec("pci0000:00/0000:00:03.0", 0x030200, gpu),
	})
	dev := func(s string) *pcie.Device { return topo.Device(mustAddr(t, s)) }
	calc := NewCalculator(topo, intel)
	for _, pr := range [][2]string{
		{"0000:00:01.0", "0000:01:00.0"}, {"0000:01:00.0", "0000:00:01.0"},
		{"0000:01:00.0", "0000:00:03.0"}, {"0000:03:00.0", "0000:00:02.0"}, {"0000:00:03.0", "0000:03:00.0"},
	} {
		p, q := dev(pr[0]), dev(pr[1])
		v := calc.CheckComplete(calc.Calc(p, q), p, q)
		if v.MapType != Unknown || !v.HasUnknown(TreeImpossible) || v.Fix != nil {
			t.Errorf("%s -> %s: %s %d (%s), unknowns %q; want unknown, the tree is impossible", pr[0], pr[1], v.MapType, v.Distance, v.Reason, v.Unknowns)
		}
	}
	// Two GPUs on the root bus, and the bridge with the NIC below it: their walks
	// cross no impossible link.
	if v := calc.Calc(dev("0000:00:01.0"), dev("0000:00:03.0")); v.MapType == Unknown {
		t.Errorf("root-bus GPUs: unknown (%s), want the kernel's verdict", v.Reason)
	}
}

func mustAddr(tb testing.TB, s string) pcie.Address {
	tb.Helper()
	a, err := pcie.ParseAddress(s)
	if err != nil {
		tb.Fatal(err)
	}
	return a
}
