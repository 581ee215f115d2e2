package render_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"

	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/render"
)

// TestPrometheusUnevaluated: a run that could not evaluate the node still
// writes p2pcheck_up 0, its exit code, start time and duration.
func TestPrometheusUnevaluated(t *testing.T) {
	start := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	reg := render.PrometheusUnevaluated(render.Run{ExitCode: 3, Start: start, Duration: 250 * time.Millisecond, ToolVersion: "v0.3.0"})
	fams := testsupport.Metrics(t, bytes.NewReader(text(t, reg)))
	got := map[string][]string{}
	for name, f := range fams {
		got[name] = series(f)
		if f.GetType() != dto.MetricType_GAUGE || f.GetHelp() == "" {
			t.Errorf("%s: type %s, help %q", name, f.GetType(), f.GetHelp())
		}
	}
	want := map[string][]string{
		"p2pcheck_up":                         {" 0"},
		"p2pcheck_exit_code":                  {" 3"},
		"p2pcheck_last_run_timestamp_seconds": {" 1796014800"},
		"p2pcheck_run_duration_seconds":       {" 0.25"},
		"p2pcheck_build_info":                 {"cuda=,driver=,version=v0.3.0 1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("families (-want +got):\n%s", diff)
	}
}

// TestPrometheusUp: a report's textfile says p2pcheck_up 1.
func TestPrometheusUp(t *testing.T) {
	fams := writeTextfile(t, machineReport(t, "degraded-link"))
	if diff := cmp.Diff([]string{" 1"}, series(fams["p2pcheck_up"])); diff != "" {
		t.Errorf("p2pcheck_up (-want +got):\n%s", diff)
	}
}

// TestNFDUnevaluated: the features file of a run that could not evaluate the
// node is valid and says ready=false.
func TestNFDUnevaluated(t *testing.T) {
	expiry := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	if err := render.NFDUnevaluated(&b, "v0.3.0\n", expiry); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		render.NFDNamespace + "/p2pcheck.ready":   "false",
		render.NFDNamespace + "/p2pcheck.overall": "error",
	}
	if diff := cmp.Diff(want, checkNFD(t, b.String(), expiry)); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
}
