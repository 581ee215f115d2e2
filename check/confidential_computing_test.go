package check_test

import (
	"testing"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/gpu"
)

func TestConfCompute(t *testing.T) {
	all := []check.Capability{check.CapP2P, check.CapGDR, check.CapGDRCopy}
	runGPUCases(t, "confidential_computing", []gpuCase{
		{"off", func(*gpu.Facts) {}, verdict{check.Pass, nil, "confidential computing is off", ""}},
		{"on", func(f *gpu.Facts) { f.ConfCompute.Enabled = true }, verdict{check.Fail, all, "confidential computing is on", "--set-cc-mode=off"}},
		{"unsupported", func(f *gpu.Facts) { f.ConfCompute = &gpu.ConfCompute{} }, verdict{check.Pass, nil, "not supported", ""}},
		{"unknown", func(f *gpu.Facts) { f.ConfCompute = nil }, verdict{check.Unknown, all, "did not report", ""}},
	})
	f := check.NewFacts(loadMachine(t, "degraded-link"), check.Inputs{NoNVML: "NVML not queried: --quick"})
	compare(t, outcome{check.Skip, "NVML not queried: --quick", ""}, run1(t, f, "confidential_computing"))
}
