package check_test

import (
	"slices"
	"testing"

	"github.com/p2pkit/p2pkit/check"
)

// TestNVIDIADriverBlocks: without the NVIDIA driver GPU P2P, GPUDirect RDMA and
// GDRCopy fail, but the kernel's P2PDMA does not use the driver, so --require
// nvme-p2p turns the failure into a warning (issue #23 item 11).
func TestNVIDIADriverBlocks(t *testing.T) {
	n := loadMachine(t, "dgx-h100")
	n.Platform.NVIDIA, n.Platform.NVIDIAParams = nil, nil
	res, err := check.Run(check.NewFacts(n, check.Inputs{}), []string{"nvidia_driver"})
	if err != nil {
		t.Fatal(err)
	}
	want := []check.Capability{check.CapP2P, check.CapGDR, check.CapGDRCopy}
	if res[0].Status != check.Fail || !slices.Equal(res[0].Blocks, want) {
		t.Errorf("nvidia_driver = %s blocking %v, want a fail blocking %v", res[0].Status, res[0].Blocks, want)
	}
	req := []check.Capability{check.CapNVMeP2P}
	if j := check.Judge(res, req); j[0].Status != check.Warn || check.Overall(j, req) != check.Warn {
		t.Errorf("under --require nvme-p2p: %s, overall %s; want a warning", j[0].Status, check.Overall(j, req))
	}
}

// TestPerformanceOnlyUnknown: numa_node and gpu_nic_affinity decide how fast
// GPUDirect RDMA is, not whether it works: their unknown never makes the node
// unknown, even under --require gdr, and is never "fix first".
func TestPerformanceOnlyUnknown(t *testing.T) {
	for _, id := range []string{"numa_node", "gpu_nic_affinity"} {
		r := []check.Result{{ID: id, Status: check.Unknown, PerformanceOnly: true, Summary: "x"}}
		req := []check.Capability{check.CapGDR}
		if o := check.Overall(check.Judge(r, req), req); o != check.Pass {
			t.Errorf("%s unknown: overall %s, want pass", id, o)
		}
		if f := check.First(r, req); f != nil {
			t.Errorf("%s unknown is fix first", id)
		}
	}
}
