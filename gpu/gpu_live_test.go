package gpu_test

import (
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/internal/cuda"
	"github.com/p2pkit/p2pkit/pcie"
)

// TestProbeLive runs against the real NVML. Without it the test skips, or
// fails under P2PKIT_REQUIRE_HW=1.
func TestProbeLive(t *testing.T) {
	f, err := gpu.Probe()
	if errors.Is(err, gpu.ErrNoNVML) {
		if os.Getenv("P2PKIT_REQUIRE_HW") == "1" {
			t.Fatalf("P2PKIT_REQUIRE_HW=1 but: %v", err)
		}
		t.Skipf("no NVML: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	n := len(f.GPUs)
	if n == 0 {
		t.Fatal("NVML initialised but reports no GPU")
	}
	if f.DriverVersion == "" || f.CUDADriverVersion == 0 {
		t.Errorf("driver %q, CUDA %d: want both known (unknown: %v)", f.DriverVersion, f.CUDADriverVersion, f.Unknown)
	}
	if len(f.Pairs) != n*(n-1) {
		t.Errorf("%d pairs for %d GPUs, want %d", len(f.Pairs), n, n*(n-1))
	}
	var nvmlAddrs []pcie.Address
	for _, g := range f.GPUs {
		if g.Address == nil || g.BAR1Total == nil || *g.BAR1Total == 0 || g.MemoryTotal == nil || g.NVLink == nil {
			t.Errorf("GPU %d: missing facts: %+v", g.Index, g)
			continue
		}
		nvmlAddrs = append(nvmlAddrs, *g.Address)
		for _, l := range g.NVLink.Links {
			t.Logf("GPU %d NVLink %d: remote %v type %q", g.Index, l.Link, l.Remote, l.RemoteType)
		}
		t.Logf("GPU %d %s %s: BAR1 %d MiB (used %d MiB), FB %d MiB, NVLinks %d, unknown %v",
			g.Index, g.Name, g.Address, *g.BAR1Total>>20, *g.BAR1Used>>20, *g.MemoryTotal>>20, g.NVLink.Active, g.Unknown)
	}
	for _, p := range f.Pairs {
		if p.CommonAncestor == nil || p.P2P.Read == nil || p.P2P.Write == nil {
			t.Errorf("pair %d->%d: missing facts: %+v", p.A, p.B, p)
			continue
		}
		t.Logf("pair %d->%d: %s, read %s write %s nvlink %v atomics %v prop %v",
			p.A, p.B, p.CommonAncestor, p.P2P.Read, p.P2P.Write, p.P2P.NVLink, p.P2P.Atomics, p.P2P.Prop)
	}
	t.Logf("driver %s, CUDA %d, CC %+v, init %v, total %v", f.DriverVersion, f.CUDADriverVersion, f.ConfCompute, f.Timing.Init, f.Timing.Total)

	// CUDA must see the same PCI functions (its order may differ).
	cn, err := cuda.DeviceCount()
	if err != nil {
		t.Logf("no CUDA cross-check: %v", err)
		return
	}
	var cudaAddrs []pcie.Address
	for i := range cn {
		d, err := cuda.DeviceGet(i)
		if err != nil {
			t.Fatal(err)
		}
		a, err := d.PCIBusID()
		if err != nil {
			t.Fatal(err)
		}
		cudaAddrs = append(cudaAddrs, a)
	}
	slices.SortFunc(nvmlAddrs, pcie.Address.Compare)
	slices.SortFunc(cudaAddrs, pcie.Address.Compare)
	if diff := cmp.Diff(nvmlAddrs, cudaAddrs); diff != "" {
		t.Errorf("NVML and CUDA disagree on GPU addresses (-nvml +cuda):\n%s", diff)
	}
}
