package check_test

import (
	"testing"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/gpu"
)

func TestNVMLP2P(t *testing.T) {
	cns := gpu.P2PChipsetNotSupported
	runGPUCases(t, "nvml_p2p_status", []gpuCase{
		{"ok", func(*gpu.Facts) {}, verdict{check.Pass, nil, "allows P2P for all 2 ordered GPU pairs", ""}},
		{"cns", func(f *gpu.Facts) { f.Pairs[1].P2P.Read = &cns }, verdict{check.Fail, p2p, "refuses P2P for 1 ordered pair", "acs_path"}},
		{"unknown", func(f *gpu.Facts) { f.Pairs[1].P2P.Read = nil }, verdict{check.Unknown, p2p, "did not report P2P status for 1 of 2", ""}},
	})
	f := check.NewFacts(loadMachine(t, "degraded-link"), check.Inputs{NoNVML: "NVML not queried: --quick"})
	compare(t, outcome{check.Skip, "NVML not queried: --quick", ""}, run1(t, f, "nvml_p2p_status"))
}
