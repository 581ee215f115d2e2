package render_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/render"
)

// TestUnknownEverywhere: a report that could not see ACS says so in every output:
// the text status and exit, Prometheus value 5, NFD ready=false.
func TestUnknownEverywhere(t *testing.T) {
	r := machineReport(t, "dgx-h100-nonroot")
	if r.Overall != check.Unknown || r.ExitCode != 3 {
		t.Fatalf("overall %s exit %d, want unknown, 3", r.Overall, r.ExitCode)
	}
	var text bytes.Buffer
	if err := render.ReportText(&text, r, render.Style{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nUNKNOWN  acs_path", "\noverall: UNKNOWN (exit 3)\n", "requirements: p2p (GPU peer-to-peer), gdr (GPUDirect RDMA)"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q", want)
		}
	}
	if v := render.StatusValue(check.Unknown); v != 5 {
		t.Errorf("StatusValue(unknown) = %v, want 5", v)
	}
	fams := writeTextfile(t, r)
	if got := series(fams["p2pcheck_overall_status"]); len(got) != 1 || got[0] != " 5" {
		t.Errorf("p2pcheck_overall_status = %v, want 5", got)
	}
	if !contains(series(fams["p2pcheck_check_status"]), "check=acs_path,subject= 5") {
		t.Errorf("p2pcheck_check_status lacks acs_path 5: %v", series(fams["p2pcheck_check_status"]))
	}
	var nfd bytes.Buffer
	if err := render.NFDFeatures(&nfd, r, r.Timestamp.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	labels := checkNFD(t, nfd.String(), r.Timestamp.Add(time.Hour))
	for k, want := range map[string]string{"ready": "false", "overall": "unknown", "check.acs_path": "unknown", "acs": "unknown", "p2p": "false"} {
		if got := labels[render.NFDNamespace+"/p2pcheck."+k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
}
