package p2pdma

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/kversion"
	"github.com/p2pkit/p2pkit/pcie"
)

// machine writes the named synthetic machine to a temporary root and reads it back
// the way p2pcheck reads a live one.
type machine struct {
	topo *pcie.Topology
	plat Platform
	m    *fixture.Machine
}

func loadFixture(tb testing.TB, name string) machine {
	tb.Helper()
	m := testsupport.Fixture(tb, name)
	topo, plat := loadFS(tb, testsupport.OpenRoot(tb, testsupport.Root(tb, m)))
	return machine{topo: topo, plat: plat, m: m}
}

// dev returns the function the fixture labelled label.
func (m machine) dev(tb testing.TB, label string) *pcie.Device {
	tb.Helper()
	return testsupport.Device(tb, m.topo, m.m, label)
}

// up returns the n-th bridge above d (VFs climb through their PF).
func up(d *pcie.Device, n int) pcie.Address {
	for range n {
		d = d.Upstream()
	}
	return d.Address
}

func TestFixtureMachines(t *testing.T) {
	tests := []struct {
		machine, provider, client string
		want                      func(m machine, p, c *pcie.Device) outcome
		// vfConfig: a VF's config space reads vendor 0xffff (SR-IOV), which
		// pcie.ParseConfig rejects today, so the VF's own ACS is unknown; the map
		// type does not depend on it here, and Unknowns is not compared.
		vfConfig bool
	}{
		{
			// Same level-1 PEX switch: ACS on both downstream ports; every root bus
			// starts with 8086:09a2, whitelisted.
			machine: "dgx-h100", provider: "gpu0", client: "nic0",
			want: func(m machine, p, c *pcie.Device) outcome {
				return outcome{MapType: ThruHostBridge, Distance: 4,
					ACSRedirect: []string{up(p, 1).String(), up(c, 1).String()},
					KernelParam: "pci=disable_acs_redir=" + up(p, 1).String() + ";" + up(c, 1).String()}
			},
		},
		{
			// Common level-0 switch: four downstream ports redirect.
			machine: "dgx-h100", provider: "gpu0", client: "gpu1",
			want: func(m machine, p, c *pcie.Device) outcome {
				acs := []string{up(p, 1).String(), up(p, 3).String(), up(c, 1).String(), up(c, 3).String()}
				return outcome{MapType: ThruHostBridge, Distance: 8, ACSRedirect: acs,
					KernelParam: "pci=disable_acs_redir=" + acs[0] + ";" + acs[1] + ";" + acs[2] + ";" + acs[3]}
			},
		},
		{
			// Different root buses: no common bridge, chains of 6 each.
			machine: "dgx-h100", provider: "gpu0", client: "gpu7",
			want: func(machine, *pcie.Device, *pcie.Device) outcome {
				return outcome{MapType: ThruHostBridge, Distance: 12}
			},
		},
		{
			machine: "dgx-h100-acs-off", provider: "gpu0", client: "nic0",
			want: func(machine, *pcie.Device, *pcie.Device) outcome {
				return outcome{MapType: BusAddr, Distance: 4}
			},
		},
		{
			machine: "dgx-h100-acs-off", provider: "gpu0", client: "gpu1",
			want: func(machine, *pcie.Device, *pcie.Device) outcome {
				return outcome{MapType: BusAddr, Distance: 8}
			},
		},
		{
			// Without root the switch ports' ACS is unknown.
			machine: "dgx-h100-nonroot", provider: "gpu0", client: "nic0",
			want: func(machine, *pcie.Device, *pcie.Device) outcome {
				// gpu0, its port, the common upstream port, nic0's port, nic0.
				return outcome{MapType: Unknown, Distance: 4, Unknowns: []UnknownKind{ACSUnread, ACSUnread, ACSUnread, ACSUnread, ACSUnread}}
			},
		},
		{
			// ACS plays no part without a common bridge, and 09a2 sits at 00.0.
			machine: "dgx-h100-nonroot", provider: "gpu0", client: "gpu7",
			want: func(machine, *pcie.Device, *pcie.Device) outcome {
				return outcome{MapType: ThruHostBridge, Distance: 12}
			},
		},
		{
			machine: "amd-epyc", provider: "gpu0", client: "gpu3",
			want: func(machine, *pcie.Device, *pcie.Device) outcome {
				return outcome{MapType: ThruHostBridge, Distance: 4}
			},
		},
		{
			machine: "amd-epyc", provider: "gpu0", client: "nic0",
			want: func(machine, *pcie.Device, *pcie.Device) outcome {
				return outcome{MapType: ThruHostBridge, Distance: 4}
			},
		},
		{
			// VFs of one PF: the common bridge is the root port, which redirects.
			machine: "sriov-nic", provider: "vf0", client: "vf1", vfConfig: true,
			want: func(m machine, p, c *pcie.Device) outcome {
				rp := up(p, 1).String()
				return outcome{MapType: ThruHostBridge, Distance: 2, ACSRedirect: []string{rp},
					KernelParam: "pci=disable_acs_redir=" + rp}
			},
		},
		{
			machine: "sriov-nic", provider: "vf3", client: "pf1", vfConfig: true,
			want: func(m machine, p, c *pcie.Device) outcome {
				rp := up(p, 1).String()
				return outcome{MapType: ThruHostBridge, Distance: 2, ACSRedirect: []string{rp},
					KernelParam: "pci=disable_acs_redir=" + rp}
			},
		},
		{
			machine: "nvme-cmb", provider: "cmb", client: "peer",
			want: func(machine, *pcie.Device, *pcie.Device) outcome {
				return outcome{MapType: BusAddr, Distance: 4}
			},
		},
		{
			// Skylake-E root port A 8086:2030 first on each root bus, kernel 5.15.
			machine: "intel-skylake", provider: "gpu0", client: "gpu3",
			want: func(machine, *pcie.Device, *pcie.Device) outcome {
				return outcome{MapType: ThruHostBridge, Distance: 4}
			},
		},
		{
			// Kernel 5.4: host-bridge rules before 5.9 are not modelled.
			machine: "intel-xeon-e5", provider: "gpu0", client: "gpu1",
			want: func(machine, *pcie.Device, *pcie.Device) outcome {
				return outcome{MapType: Unknown, Distance: 4, Unknowns: []UnknownKind{OldKernelRules}}
			},
		},
		{
			machine: "first-not-root-port", provider: "gpu0", client: "gpu1",
			want: func(machine, *pcie.Device, *pcie.Device) outcome {
				return outcome{MapType: NotSupported, Distance: 4}
			},
		},
	}
	loaded := map[string]machine{}
	for _, tt := range tests {
		t.Run(tt.machine+"/"+tt.provider+"-"+tt.client, func(t *testing.T) {
			m, ok := loaded[tt.machine]
			if !ok {
				m = loadFixture(t, tt.machine)
				loaded[tt.machine] = m
			}
			p, c := m.dev(t, tt.provider), m.dev(t, tt.client)
			v := NewCalculator(m.topo, m.plat).Calc(p, c)
			got := project(v)
			if tt.vfConfig {
				got.Unknowns = nil
			}
			if diff := cmp.Diff(tt.want(m, p, c), got); diff != "" {
				t.Errorf("verdict (-want +got):\n%s\nreason: %s", diff, v.Reason)
			}
		})
	}
}

// TestFixtureIntelXeonE5On6x runs the Xeon E5 machine as if it ran a modelled
// kernel: 3c00/3c01 allow traffic within a socket and refuse it across.
func TestFixtureIntelXeonE5On6x(t *testing.T) {
	m := loadFixture(t, "intel-xeon-e5")
	m.plat.Kernel = kversion.Version{Major: 6, Minor: 1}
	c := NewCalculator(m.topo, m.plat)
	got := []outcome{
		project(c.Calc(m.dev(t, "gpu0"), m.dev(t, "gpu1"))),
		project(c.Calc(m.dev(t, "gpu0"), m.dev(t, "gpu2"))),
	}
	want := []outcome{{MapType: ThruHostBridge, Distance: 4}, {MapType: NotSupported, Distance: 4}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("verdicts (-want +got):\n%s", diff)
	}
}

// BenchmarkAllPairsLarge runs every ordered pair of the fixture's Large machine (about
// a thousand functions: DGX-class tree plus 960 VFs) read back through sysfs.
func BenchmarkAllPairsLarge(b *testing.B) {
	m := loadFixture(b, "large")
	pairs := 0
	b.ReportAllocs()
	for b.Loop() {
		c := NewCalculator(m.topo, m.plat)
		for range c.All(m.topo.Devices) {
			pairs++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pairs), "ns/pair")
	b.ReportMetric(float64(len(m.topo.Devices)), "functions")
}
