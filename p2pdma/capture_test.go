package p2pdma

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/procfs"
)

// loadSnapshot reads a captured machine the way p2pcheck does.
func loadSnapshot(tb testing.TB, path string) (*pcie.Topology, Platform) {
	tb.Helper()
	return loadFS(tb, testsupport.OpenSnapshot(tb, path))
}

// loadFS reads the topology and the P2PDMA platform facts beneath root.
func loadFS(tb testing.TB, root hostfs.Root) (*pcie.Topology, Platform) {
	tb.Helper()
	present := func(err error) bool {
		ok, err := hostfs.Optional(err)
		if err != nil {
			tb.Fatal(err)
		}
		return ok
	}
	var plat Platform
	proc := procfs.New(root)
	if c, err := proc.CPUInfo(); present(err) {
		plat.CPUVendor, plat.CPUFamily = c.VendorID, c.Family
	}
	if v, err := proc.KernelVersion(); present(err) {
		plat.Kernel = v.Series()
	}
	return testsupport.Topology(tb, root), plat
}

// TestH200Capture checks the two-H200 cloud VM: every function sits on the root bus
// of one host bridge whose first function, 00:00.0, is 8086:0d57 (not whitelisted),
// and the CPU is Intel, so every pair of distinct functions is not-supported with
// distance 1+1.
func TestH200Capture(t *testing.T) {
	topo, plat := loadSnapshot(t, "../testdata/h200-2gpu-vm/snapshot.tar.gz")
	if diff := cmp.Diff(Platform{CPUVendor: "GenuineIntel", CPUFamily: 6}, plat); diff != "" {
		t.Fatalf("platform of the capture (-want +got):\n%s", diff)
	}
	gpus := topo.GPUs()
	if len(gpus) != 2 {
		t.Fatalf("capture has %d GPUs; want 2", len(gpus))
	}
	c := NewCalculator(topo, plat)
	got := project(c.Calc(gpus[0], gpus[1]))
	want := outcome{MapType: NotSupported, Distance: 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GPU pair verdict (-want +got):\n%s", diff)
	}
	if r := c.Calc(gpus[0], gpus[1]).Reason; r != "client and provider do not share an upstream bridge, and no whitelisted "+
		"host bridge joins them: host bridge not in P2PDMA whitelist: 8086:0d57 (0000:00:00.0, first function of pci0000:00)" {
		t.Errorf("reason = %q", r)
	}
	n := 0
	for v := range c.All(topo.Endpoints()) {
		n++
		if v.MapType != NotSupported || v.Distance != 2 {
			t.Errorf("%v -> %v: %v distance %d; want not-supported distance 2", v.Provider, v.Client, v.MapType, v.Distance)
		}
	}
	if n == 0 {
		t.Error("no pairs in the capture")
	}
}
