package check_test

import (
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/check"
)

// TestUnknownExitsThree: without root the DGX's ACS is unknown: the report exits 3
// and its fix-first line says to run as root.
func TestUnknownExitsThree(t *testing.T) {
	r := report(t, "dgx-h100-nonroot")
	if r.Overall != check.Unknown || r.ExitCode != check.ExitNoEval {
		t.Errorf("overall %s exit %d, want unknown, 3", r.Overall, r.ExitCode)
	}
	if ff := r.FixFirst; ff == nil || ff.ID != "acs_path" || !strings.Contains(ff.Remediation, "run p2pcheck as root (CAP_SYS_ADMIN) to read ACS Control past config space offset 64") {
		t.Errorf("fix first = %+v, want acs_path and how to read it", r.FixFirst)
	}
	if r.Features.Ready != "false" || r.Features.P2P != "false" {
		t.Errorf("ready %s, p2p %s; want false while ACS is unknown", r.Features.Ready, r.Features.P2P)
	}
}
