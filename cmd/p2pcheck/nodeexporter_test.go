package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
)

// lookTool finds a program of the integration tests or skips: a skip fails
// under CI=true or P2PKIT_REQUIRE_HW=1.
func lookTool(t *testing.T, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	why := "none of " + strings.Join(names, ", ") + " is installed (.ci/run installs them)"
	if os.Getenv("CI") == "true" || os.Getenv("P2PKIT_REQUIRE_HW") == "1" {
		t.Fatal(why)
	}
	t.Skip(why)
	return ""
}

// seriesKeys returns "name{label="value",...}" for every series of fams.
func seriesKeys(fams map[string]*dto.MetricFamily) []string {
	var out []string
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+strconv.Quote(l.GetValue()))
			}
			slices.Sort(ls)
			out = append(out, name+"{"+strings.Join(ls, ",")+"}")
		}
	}
	slices.Sort(out)
	return out
}

// TestNodeExporter writes the --quick and the full report's textfiles of one
// node into one directory and has Debian's prometheus-node-exporter serve them
// on 127.0.0.1: every p2pcheck series of both files is served, the textfile
// collector reports no error, and promtool finds nothing to complain about.
func TestNodeExporter(t *testing.T) {
	exporter := lookTool(t, "prometheus-node-exporter", "node_exporter")
	promtool := lookTool(t, "promtool")
	root := machineRoot(t, "degraded-link")
	dir := t.TempDir()
	quick, full := filepath.Join(dir, "p2pcheck-quick.prom"), filepath.Join(dir, "p2pcheck.prom")
	for _, args := range [][]string{
		{"--root", root, "--quick", "--expect", "gpus=2", "--prometheus", quick},
		{"--root", root, "--expect", "gpus=2", "--prometheus", full},
	} {
		if code, _, stderr := p2pcheck(args...); code != 0 {
			t.Fatalf("p2pcheck %q: exit %d: %s", args, code, stderr)
		}
	}
	var want []string
	for _, f := range []string{quick, full} {
		want = append(want, seriesKeys(testsupport.MetricsFile(t, f))...)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, exporter, "--web.listen-address="+addr, "--collector.disable-defaults",
		"--collector.textfile", "--collector.textfile.directory="+dir)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })

	// Wait for it to listen: a bound, not a measure of speed.
	var body []byte
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node_exporter did not serve /metrics on %s: %v\n%s", addr, err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parsing the scrape: %v", err)
	}
	if e := fams["node_textfile_scrape_error"]; e == nil || len(e.GetMetric()) != 1 || e.GetMetric()[0].GetGauge().GetValue() != 0 {
		t.Errorf("node_textfile_scrape_error = %v, want 0\n%s", e, logs.String())
	}
	got := seriesKeys(fams)
	missing := 0
	for _, k := range want {
		if _, ok := slices.BinarySearch(got, k); !ok {
			missing++
			if missing <= 10 {
				t.Errorf("not served: %s", k)
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d p2pcheck series not served\n%s", missing, len(want), logs.String())
	}
	if len(want) < 20 {
		t.Errorf("only %d series in the two textfiles", len(want))
	}

	check := exec.Command(promtool, "check", "metrics")
	check.Stdin = bytes.NewReader(body)
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
