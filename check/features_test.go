package check_test

import (
	"testing"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/gpu"
)

// TestNFDP2PWhenDriverRefuses: the p2p label is false when NVML says the driver
// refuses P2P, though nvml_p2p_status only warns.
func TestNFDP2PWhenDriverRefuses(t *testing.T) {
	cns := gpu.P2PChipsetNotSupported
	n := withGPUFacts(loadMachine(t, "dgx-h100-acs-off"), func(f *gpu.Facts) {})
	f := check.NewFacts(n, check.Inputs{})
	res, _ := check.Run(f, nil)
	if rep := check.NewReport(f, res, testMeta); rep.Features.P2P != "true" {
		t.Fatalf("p2p = %s with the driver allowing P2P, want true", rep.Features.P2P)
	}
	n = withGPUFacts(loadMachine(t, "dgx-h100-acs-off"), func(f *gpu.Facts) { f.Pairs[0].P2P.Read = &cns })
	f = check.NewFacts(n, check.Inputs{})
	res, _ = check.Run(f, nil)
	if rep := check.NewReport(f, res, testMeta); rep.Features.P2P != "false" {
		t.Errorf("p2p = %s with the driver refusing P2P reads, want false", rep.Features.P2P)
	}
}
