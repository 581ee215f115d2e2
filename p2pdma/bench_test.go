package p2pdma

import (
	"fmt"
	"testing"

	"github.com/p2pkit/p2pkit/pcie"
)

// bigTopo builds about a thousand functions: 4 host bridges (Ice Lake, one PCI domain
// each) with 8 root
// ports each; below every root port a switch with 8 downstream ports and a
// 3-function endpoint on each. Root ports have ACS redirect set (above every common
// bridge, so never checked) and so has every third downstream port.
func bigTopo(tb testing.TB) *pcie.Topology {
	tb.Helper()
	b := newBuilder()
	for hbi := range 4 {
		// One PCI domain per host bridge keeps bus numbers below 256.
		h := b.host(uint32(hbi), 0)
		at := func(bus, dev, fn int) string { return fmt.Sprintf("%04x:%02x:%02x.%d", hbi, bus, dev, fn) }
		bus, root := 0, 0
		b.fn(tb, h, nil, at(root, 0, 0), idIceLake, pcie.PortRCiEP, noACS)
		bus++
		for rpi := range 8 {
			rp := b.fn(tb, h, nil, at(root, rpi+1, 0), idQEMURP, pcie.PortRootPort, acsIOMMU)
			usp := b.fn(tb, h, rp, at(bus, 0, 0), idPEX, pcie.PortUpstream, noACS)
			bus++
			dspBus := bus
			bus++
			for dpi := range 8 {
				acs := 0
				if (hbi+rpi+dpi)%3 == 0 {
					acs = acsIOMMU
				}
				dsp := b.fn(tb, h, usp, at(dspBus, dpi, 0), idPEX, pcie.PortDownstream, acs)
				for f := range 3 {
					b.fn(tb, h, dsp, at(bus, 0, f), idNVMe, pcie.PortEndpoint, noACS)
				}
				bus++
			}
		}
	}
	return b.t
}

func TestAllPairs(t *testing.T) {
	topo := bigTopo(t)
	n := len(topo.Devices)
	c := NewCalculator(topo, intel)
	count := 0
	counts := map[MapType]int{}
	for v := range c.All(topo.Devices) {
		count++
		counts[v.MapType]++
	}
	if want := n * (n - 1); count != want {
		t.Errorf("All yielded %d verdicts for %d functions; want %d", count, n, want)
	}
	if counts[BusAddr] == 0 || counts[ThruHostBridge] == 0 || counts[Unknown] != 0 {
		t.Errorf("map type counts %v: want bus-addr and thru-host-bridge, no unknown", counts)
	}
	// A sample of pairs agrees with a fresh one-shot computation.
	for i := 0; i < n; i += 97 {
		for j := 0; j < n; j += 89 {
			p, q := topo.Devices[i], topo.Devices[j]
			got, want := c.Calc(p, q), Calc(topo, intel, p, q)
			if got.MapType != want.MapType || got.Distance != want.Distance || got.Reason != want.Reason {
				t.Errorf("%v -> %v: calculator %v/%d, one-shot %v/%d", p.Address, q.Address,
					got.MapType, got.Distance, want.MapType, want.Distance)
			}
		}
	}
}

// BenchmarkAllPairs reports the cost of every ordered pair of ~1,000 functions, the
// work of `p2pcheck pairs --all`, with ns/pair as a custom metric.
func BenchmarkAllPairs(b *testing.B) {
	topo := bigTopo(b)
	n := len(topo.Devices)
	b.ReportAllocs()
	pairs := 0
	for b.Loop() {
		c := NewCalculator(topo, intel)
		for v := range c.All(topo.Devices) {
			_ = v
			pairs++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pairs), "ns/pair")
	b.ReportMetric(float64(n), "functions")
}

// TestConcurrentCalc shares one Calculator between goroutines (run with -race): the
// verdicts must equal those of a fresh Calculator.
func TestConcurrentCalc(t *testing.T) {
	topo := bigTopo(t)
	devs := topo.Devices[:200]
	byAddr := map[pcie.Address]*pcie.Device{}
	for _, d := range devs {
		byAddr[d.Address] = d
	}
	c := NewCalculator(topo, intel)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			ref := NewCalculator(topo, intel)
			for v := range c.All(devs) {
				w := ref.Calc(byAddr[v.Provider], byAddr[v.Client])
				if v.MapType != w.MapType || v.Reason != w.Reason || len(v.ACSRedirect) != len(w.ACSRedirect) {
					errs <- fmt.Errorf("%v -> %v: %v, fresh calculator %v", v.Provider, v.Client, v.MapType, w.MapType)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
