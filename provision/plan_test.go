package provision

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pcie"
)

// writeMachine writes the named synthetic machine to a fresh root and returns it.
func writeMachine(t *testing.T, name string) string {
	t.Helper()
	return testsupport.Root(t, testsupport.Fixture(t, name))
}

// load reads the machine under root as p2pcheck does.
func load(t *testing.T, root string) *node.Node {
	t.Helper()
	return testnode.Root(t, root, node.Options{NoNames: true})
}

// optionsOf is what p2pcheck fix passes for a bare-metal plan of n.
func optionsOf(n *node.Node) Options {
	return Options{Kernel: n.Release(), IOMMU: len(n.Platform.IOMMUGroups) > 0}
}

func addrs(ds []Action) []string {
	out := make([]string, len(ds))
	for i, a := range ds {
		out[i] = a.Device.Address.String()
	}
	return out
}

// TestPlanDGX: on the DGX-like node every PEX downstream port has ACS redirect, and
// every one of them stands between some GPU and its NIC, its NVMe or another GPU
// below the same root port; the root ports, above every common bridge, do not. The
// plan must list exactly those ports, and predict bus-addr for every pair below one
// root port.
func TestPlanDGX(t *testing.T) {
	n := load(t, writeMachine(t, "dgx-h100"))
	plan := NewPlan(n.Topology, n.P2P(), PairsOfInterest(n.Interesting()), optionsOf(n))
	var want []string
	for _, d := range n.Topology.Devices {
		if pt, _ := d.PortType(); pt == pcie.PortDownstream && d.Vendor == 0x1000 {
			want = append(want, d.Address.String())
		}
	}
	if len(want) != 26 {
		t.Fatalf("the fixture has %d PEX downstream ports, want 26", len(want))
	}
	if diff := cmp.Diff(want, addrs(plan.Actions)); diff != "" {
		t.Errorf("planned functions (-PEX downstream ports +plan):\n%s", diff)
	}
	if len(plan.Unknown) > 0 {
		t.Errorf("unknowns: %q", plan.Unknown)
	}
	for _, a := range plan.Actions {
		if a.Control != 0x001d || a.Planned != 0x0011 {
			t.Errorf("%s: ACS Control %#x -> %#x, want 0x1d -> 0x11", a.Device.Address, a.Control, a.Planned)
		}
	}
	changed := 0
	for _, p := range plan.Pairs {
		pRoot, qRoot := rootOf(p.Provider), rootOf(p.Client)
		switch {
		case pRoot == qRoot && p.Predicted.MapType != p2pdma.BusAddr:
			t.Errorf("%s -> %s below one root port: predicted %s", p.Provider.Address, p.Client.Address, p.Predicted.MapType)
		case pRoot != qRoot && !SameVerdict(p.Before, p.Predicted):
			t.Errorf("%s -> %s below two root ports changed: %s -> %s", p.Provider.Address, p.Client.Address, p.Before.MapType, p.Predicted.MapType)
		}
		if !SameVerdict(p.Before, p.Predicted) {
			changed++
		}
	}
	if changed == 0 || !plan.Changed() {
		t.Error("no pair changes")
	}
}

// rootOf returns the function on the root bus above d.
func rootOf(d *pcie.Device) *pcie.Device {
	for d.Upstream() != nil {
		d = d.Upstream()
	}
	return d
}

// TestPlanNothingToDo: with ACS off on the switch ports, nothing stands between the
// peers (the root ports are above every common bridge).
func TestPlanNothingToDo(t *testing.T) {
	n := load(t, writeMachine(t, "dgx-h100-acs-off"))
	plan := NewPlan(n.Topology, n.P2P(), PairsOfInterest(n.Interesting()), optionsOf(n))
	if len(plan.Actions) != 0 || plan.Boot.Param != "" || plan.GrubDropIn() != "" || plan.Changed() {
		t.Errorf("plan has actions %q, parameter %q", addrs(plan.Actions), plan.Boot.Param)
	}
	if r := plan.NewReport(true, nil, nil, nil); r.Result != ResultNothingToDo || r.ExitCode != 0 {
		t.Errorf("report: %s, exit %d", r.Result, r.ExitCode)
	}
}

// TestPlanUnread: without root, ACS Control is unknown and the plan says so.
func TestPlanUnread(t *testing.T) {
	n := load(t, writeMachine(t, "dgx-h100-nonroot"))
	plan := NewPlan(n.Topology, n.P2P(), PairsOfInterest(n.Interesting()), optionsOf(n))
	if len(plan.Unknown) == 0 || len(plan.Actions) != 0 {
		t.Fatalf("unknowns %d, actions %q", len(plan.Unknown), addrs(plan.Actions))
	}
	if r := plan.NewReport(false, nil, nil, nil); r.Result != ResultUnknown || r.ExitCode != ExitUnknown {
		t.Errorf("report: %s, exit %d", r.Result, r.ExitCode)
	}
}

// TestGrubDropIn checks the --persist drop-in of the DGX-like node against
// testdata/dgx-h100.grub.cfg.
func TestGrubDropIn(t *testing.T) {
	root := writeMachine(t, "dgx-h100")
	n := load(t, root)
	plan := NewPlan(n.Topology, n.P2P(), PairsOfInterest(n.Interesting()), optionsOf(n))
	testsupport.Golden(t, "testdata/dgx-h100.grub.cfg", []byte(plan.GrubDropIn()))
	if err := plan.WriteDropIn(root); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, DropInPath))
	if err != nil || string(b) != plan.GrubDropIn() {
		t.Errorf("written drop-in: %v\n%s", err, b)
	}
}

// TestApply performs the plan on a writable fixture tree: every register is
// rewritten and read back, the machine read again gives the predicted verdicts,
// and a second plan finds nothing to do.
func TestApply(t *testing.T) {
	root := writeMachine(t, "dgx-h100")
	n := load(t, root)
	plan := NewPlan(n.Topology, n.P2P(), PairsOfInterest(n.Interesting()), optionsOf(n))
	done, ok := Apply(root, plan)
	if !ok || len(done) != len(plan.Actions) {
		t.Fatalf("apply: ok %v, %d of %d done", ok, len(done), len(plan.Actions))
	}
	for _, d := range done {
		if d.Err != nil || !d.Written || d.Before != 0x001d || d.After != 0x0011 {
			t.Errorf("%s: %+v", d.Device.Address, d.ACSControlWrite)
		}
	}
	n2 := load(t, root)
	after, mismatched := plan.Compare(n2.Topology, n2.P2P())
	if len(mismatched) > 0 {
		for _, i := range mismatched {
			t.Errorf("%s -> %s: after %s %d, predicted %s %d", plan.Pairs[i].Provider.Address, plan.Pairs[i].Client.Address,
				after[i].MapType, after[i].Distance, plan.Pairs[i].Predicted.MapType, plan.Pairs[i].Predicted.Distance)
		}
	}
	r := plan.NewReport(true, done, after, mismatched)
	if r.Result != ResultFixed || r.ExitCode != 0 || len(r.Warnings) != 1 {
		t.Errorf("report: %s, exit %d, warnings %q", r.Result, r.ExitCode, r.Warnings)
	}
	again := NewPlan(n2.Topology, n2.P2P(), PairsOfInterest(n2.Interesting()), optionsOf(n2))
	if len(again.Actions) != 0 || again.Changed() {
		t.Errorf("second plan: actions %q", addrs(again.Actions))
	}
	if d, ok := Apply(root, again); !ok || len(d) != 0 {
		t.Errorf("second apply: ok %v, %d done", ok, len(d))
	}
}

// TestApplyFailure: an action that cannot be done is reported, the others are
// still done, and the report says not fixed.
func TestApplyFailure(t *testing.T) {
	root := writeMachine(t, "dgx-h100")
	n := load(t, root)
	plan := NewPlan(n.Topology, n.P2P(), PairsOfInterest(n.Interesting()), optionsOf(n))
	first := plan.Actions[0].Device.Address.String()
	if err := os.Remove(filepath.Join(root, "sys/bus/pci/devices", first, "config")); err != nil {
		t.Fatal(err)
	}
	done, ok := Apply(root, plan)
	if ok || done[0].Err == nil || slices.ContainsFunc(done[1:], func(d Done) bool { return d.Err != nil }) {
		t.Fatalf("apply: ok %v, first error %v", ok, done[0].Err)
	}
	if r := plan.NewReport(true, done, nil, nil); r.Result != ResultNotFixed || r.ExitCode != ExitNotFixed {
		t.Errorf("report: %s, exit %d", r.Result, r.ExitCode)
	}
}

func TestDeviceSpec(t *testing.T) {
	n := load(t, writeMachine(t, "dgx-h100"))
	for _, tc := range []struct{ addr, want string }{
		{"0000:15:01.0", "0000:15:01.0"},                 // a root port
		{"0000:17:02.0", "0000:15:01.0/0.0/2.0"},         // level-0 downstream port
		{"0000:19:01.0", "0000:15:01.0/0.0/0.0/0.0/1.0"}, // level-1 downstream port
		{"0000:1b:00.0", "0000:15:01.0/0.0/0.0/0.0/1.0/0.0"},
	} {
		a, err := pcie.ParseAddress(tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := DeviceSpec(n.Topology.Device(a)); got != tc.want {
			t.Errorf("DeviceSpec(%s) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}
