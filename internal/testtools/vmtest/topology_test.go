package vmtest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/pcie"
)

// TestCatalogue checks every entry for what QEMU or the guest would reject or what
// would make a comparison meaningless: unique names, a consistent expected tree
// (every parent is a bridge whose bus range holds the child), unique QEMU ids and
// (chassis, slot) pairs, and a drive for every NVMe that takes one.
func TestCatalogue(t *testing.T) {
	cat := Catalogue()
	if len(cat) < 10 {
		t.Errorf("%d topologies, want at least 10", len(cat))
	}
	names := map[string]bool{}
	for _, topo := range cat {
		t.Run(topo.Name, func(t *testing.T) {
			if names[topo.Name] || topo.Name == "" || strings.ContainsAny(topo.Name, " /") {
				t.Errorf("bad or duplicate name %q", topo.Name)
			}
			names[topo.Name] = true
			if topo.CPU == "" || topo.Doc == "" {
				t.Error("CPU and Doc are required")
			}
			checkWant(t, topo.Want())
			checkArgs(t, topo)
			if topo.P2PMem != nil {
				for _, n := range []*Node{topo.P2PMem.Provider, topo.P2PMem.Target} {
					if _, ok := topo.Address(n); !ok || n.Kind != NVMe {
						t.Errorf("p2pmem node %+v is not an NVMe of the tree", n)
					}
				}
			}
		})
	}
}

func checkWant(t *testing.T, want []Func) {
	t.Helper()
	byAddr := map[pcie.Address]Func{}
	for _, f := range want {
		if _, dup := byAddr[f.Addr]; dup {
			t.Errorf("address %s twice", f.Addr)
		}
		byAddr[f.Addr] = f
		if len(f.ID) != 9 || f.ID[4] != ':' {
			t.Errorf("%s: bad ID %q", f.Addr, f.ID)
		}
	}
	for _, f := range want {
		if f.Parent == "" {
			if want := fmt.Sprintf("pci%04x:%02x", f.Addr.Domain, f.Addr.Bus); f.HostBridge != want {
				t.Errorf("%s on a root bus but host bridge %s", f.Addr, f.HostBridge)
			}
			continue
		}
		p, ok := byAddr[testsupport.Addr(t, f.Parent)]
		if !ok || p.Bus == "" {
			t.Errorf("%s: parent %s missing or not a bridge", f.Addr, f.Parent)
			continue
		}
		var sec, sub uint8
		fmt.Sscanf(p.Bus, "%02x-%02x", &sec, &sub)
		if f.Addr.Bus != sec || f.HostBridge != p.HostBridge {
			t.Errorf("%s is not on %s's secondary bus %02x", f.Addr, p.Addr, sec)
		}
		if f.Bus != "" {
			var csec, csub uint8
			fmt.Sscanf(f.Bus, "%02x-%02x", &csec, &csub)
			if csec <= sec || csub > sub || csec > csub {
				t.Errorf("%s bus %s is not inside %s's %s", f.Addr, f.Bus, p.Addr, p.Bus)
			}
		}
	}
}

func checkArgs(t *testing.T, topo *Topology) {
	t.Helper()
	args := topo.QEMUArgs("/w", 512, 1)
	ids, chassis := map[string]bool{}, map[string]bool{}
	for i, a := range args {
		if i == 0 || args[i-1] != "-device" {
			continue
		}
		props := strings.Split(a, ",")
		for _, p := range props[1:] {
			k, v, _ := strings.Cut(p, "=")
			switch k {
			case "id":
				if ids[v] {
					t.Errorf("QEMU id %s twice", v)
				}
				ids[v] = true
			case "chassis":
				if chassis[v] {
					t.Errorf("chassis %s twice", v)
				}
				chassis[v] = true
			case "drive":
				if !slices.Contains(topo.Drives(), strings.TrimPrefix(v, "drv-")+".img") {
					t.Errorf("drive %s has no image", v)
				}
			}
		}
	}
	for _, p := range topo.layout() {
		if !ids[p.qbus] && p.qbus != "pcie.0" {
			t.Errorf("%s plugs into unknown bus %s", p.id, p.qbus)
		}
	}
	if got := strings.Join(args, " "); topo.IOMMU != strings.Contains(got, "intel-iommu,intremap=on") ||
		topo.IOMMU != strings.Contains(got, "kernel-irqchip=split") {
		t.Errorf("IOMMU %t but args %s", topo.IOMMU, got)
	}
}

// TestCatalogueCoverage pins down what the tier is for: each case the issue asks for
// is in some entry.
func TestCatalogueCoverage(t *testing.T) {
	has := map[string]bool{}
	for _, topo := range Catalogue() {
		layoutCoverage(topo, has)
		has["intel-iommu"] = has["intel-iommu"] || topo.IOMMU
		has["no IOMMU"] = has["no IOMMU"] || !topo.IOMMU
		has["disable_acs_redir"] = has["disable_acs_redir"] || slices.ContainsFunc(topo.Append,
			func(s string) bool { return strings.HasPrefix(s, "pci=disable_acs_redir=") })
		has["AMD Zen rule"] = has["AMD Zen rule"] || topo.CPUP2P
		has["Intel CPU"] = has["Intel CPU"] || strings.Contains(topo.CPU, "Skylake")
		has["p2pmem proof"] = has["p2pmem proof"] || topo.P2PMem != nil
	}
	for _, c := range []string{"nested switch", "conventional PCI behind pcie-pci-bridge",
		"pxb-pcie on a second NUMA node", "SR-IOV VFs", "multifunction below a root port",
		"multifunction below a switch port", "NVMe CMB", "intel-iommu", "no IOMMU",
		"disable_acs_redir", "AMD Zen rule", "Intel CPU", "p2pmem proof"} {
		if !has[c] {
			t.Errorf("no catalogue entry covers %s", c)
		}
	}
}

// layoutCoverage marks in has the cases of TestCatalogueCoverage that topo's
// tree covers.
func layoutCoverage(topo *Topology, has map[string]bool) {
	for _, p := range topo.layout() {
		switch {
		case p.n.Kind == Upstream && p.parent != nil && p.parent.parent != nil && p.parent.parent.n.Kind == Upstream:
			has["nested switch"] = true
		case p.n.Kind == PCIBridge && len(p.n.Children) > 0:
			has["conventional PCI behind pcie-pci-bridge"] = true
		case p.n.Kind == PXB && p.n.NUMANode >= 0 && topo.NUMANodes == 2:
			has["pxb-pcie on a second NUMA node"] = true
		case p.n.VFs > 0:
			has["SR-IOV VFs"] = true
		case p.n.Func > 0 && p.parent != nil && p.parent.n.Kind == RootPort:
			has["multifunction below a root port"] = true
		case p.n.Func > 0 && p.parent != nil && p.parent.n.Kind == Downstream:
			has["multifunction below a switch port"] = true
		case slices.ContainsFunc(p.n.Props, func(s string) bool { return strings.HasPrefix(s, "cmb_size_mb=") }):
			has["NVMe CMB"] = true
		}
	}
}

func TestWantSwitchNVMe(t *testing.T) {
	var topo *Topology
	for _, c := range Catalogue() {
		if c.Name == "switch-nvme" {
			topo = c
		}
	}
	if topo == nil {
		t.Fatal("switch-nvme missing")
	}
	// Written out by hand: the depth-first numbering SeaBIOS does.
	want := []string{
		`0000:00:00.0 pci0000:00 8086:29c0 pci parent=""`,
		`0000:00:02.0 pci0000:00 1b36:000c root-port parent="" bus=01-05`,
		`0000:00:1f.0 pci0000:00 8086:2918 pci parent=""`,
		`0000:00:1f.2 pci0000:00 8086:2922 pci parent=""`,
		`0000:00:1f.3 pci0000:00 8086:2930 pci parent=""`,
		`0000:01:00.0 pci0000:00 104c:8232 upstream parent="0000:00:02.0" bus=02-05`,
		`0000:02:00.0 pci0000:00 104c:8233 downstream parent="0000:01:00.0" bus=03-03`,
		`0000:02:01.0 pci0000:00 104c:8233 downstream parent="0000:01:00.0" bus=04-04`,
		`0000:02:02.0 pci0000:00 104c:8233 downstream parent="0000:01:00.0" bus=05-05`,
		`0000:03:00.0 pci0000:00 1b36:0010 endpoint parent="0000:02:00.0"`,
		`0000:04:00.0 pci0000:00 1b36:0010 endpoint parent="0000:02:01.0"`,
		`0000:05:00.0 pci0000:00 1b36:0010 endpoint parent="0000:02:02.0"`,
	}
	var got []string
	for _, f := range topo.Want() {
		got = append(got, fmtFunc(f))
	}
	if !slices.Equal(got, want) {
		t.Errorf("Want() =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	sw := topo.WantSwitches()
	if len(sw) != 1 || sw[0].Upstream != "0000:01:00.0" ||
		!slices.Equal(sw[0].Downstream, []string{"0000:02:00.0", "0000:02:01.0", "0000:02:02.0"}) {
		t.Errorf("WantSwitches() = %+v", sw)
	}
}
