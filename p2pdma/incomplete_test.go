package p2pdma

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
)

// TestCheckComplete removes the downstream port above gpu1 of the degraded-link
// machine from sys/bus/pci/devices, as a partial snapshot would: gpu1's parent is
// then not known, and every verdict whose walk climbs from gpu1 is unknown, while
// a pair whose walks avoid it keeps the kernel's answer.
func TestCheckComplete(t *testing.T) {
	m := fixture.DegradedLink()
	root := testsupport.Root(t, m)
	topo, plat := loadFS(t, testsupport.OpenRoot(t, root))
	gpu0, gpu1 := topo.Device(m.Func("gpu0").Address()), topo.Device(m.Func("gpu1").Address())
	calc := NewCalculator(topo, plat)
	if v := calc.CheckComplete(calc.Calc(gpu0, gpu1), gpu0, gpu1); v.MapType == Unknown {
		t.Fatalf("complete tree: verdict %s (%s), want the kernel's", v.MapType, v.Reason)
	}

	port := gpu1.Parent.Address.String()
	if err := os.Remove(filepath.Join(root, "sys", "bus", "pci", "devices", port)); err != nil {
		t.Fatal(err)
	}
	topo, plat = loadFS(t, testsupport.OpenRoot(t, root))
	gpu0, gpu1 = topo.Device(gpu0.Address), topo.Device(gpu1.Address)
	if !gpu1.PathIncomplete {
		t.Fatalf("gpu1 PathIncomplete = false after removing %s", port)
	}
	calc = NewCalculator(topo, plat)
	for _, pair := range [][2]int{{0, 1}, {1, 0}} {
		a, b := gpu0, gpu1
		if pair[0] == 1 {
			a, b = gpu1, gpu0
		}
		v := calc.CheckComplete(calc.Calc(a, b), a, b)
		if v.MapType != Unknown || v.Fix != nil || !strings.Contains(v.Reason, gpu1.Address.String()) || !v.HasUnknown(ParentUnknown) {
			t.Errorf("%s -> %s: %s, fix %v, reason %q, unknowns %q; want unknown naming %s", a.Address, b.Address, v.MapType, v.Fix, v.Reason, v.Unknowns, gpu1.Address)
		}
	}
	// gpu0's own walk to its root port never meets the gap.
	rp := gpu0.Ancestors()[len(gpu0.Ancestors())-1]
	if v := calc.CheckComplete(calc.Calc(gpu0, rp), gpu0, rp); v.MapType == Unknown {
		t.Errorf("gpu0 -> root port: unknown (%s); the gap is not on its walk", v.Reason)
	}
}
