package render

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/p2pkit/p2pkit/drift"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/promtext"
)

// promtool returns the path of Prometheus' promtool, or skips the test: CI
// installs it (Debian's prometheus), so there a missing one fails the test.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("promtool is required in CI: %v", err)
		}
		t.Skipf("promtool not installed (%v): apt-get install prometheus", err)
	}
	return path
}

// textfile writes a registry as node_exporter's textfile collector reads it.
func textfile(t *testing.T, reg *promtext.Registry) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := reg.Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func sampleReport() DiffReport {
	r := drift.Result{Changes: []drift.Change{
		{Kind: drift.Link, Severity: drift.SeverityWarn, What: "changed", Fact: "link", Golden: "Gen5 x16", Node: "Gen4 x8 (downgraded)"},
		{Kind: drift.Checks, Severity: drift.SeverityVerdict, What: "changed", Fact: "check pcie_link", Golden: "pass", Node: "warn"},
	}}
	return NewDiffReport(DiffSide{Source: "snapshot golden.tar.gz", Signature: "6ec56cdfad5ea551"},
		DiffSide{Source: "this machine", Signature: "ea8fb0c0d310ea6c"}, r, false)
}

// TestDriftMetrics: the textfiles of diff and of the report with --golden pass
// promtool check metrics, and carry the counts of every kind.
func TestDriftMetrics(t *testing.T) {
	bin := promtool(t)
	rep := sampleReport()
	regs := map[string]*promtext.Registry{"diff": new(promtext.Registry), "report": new(promtext.Registry)}
	DiffMetrics(regs["diff"], rep, time.Unix(1764600000, 0))
	FabricMetrics(regs["report"], rep.Node.Signature, &rep)
	for name, reg := range regs {
		b := textfile(t, reg)
		cmd := exec.Command(bin, "check", "metrics")
		cmd.Stdin = bytes.NewReader(b)
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("%s textfile: promtool check metrics: %v\n%s\n%s", name, err, out, b)
		}
		fams := testsupport.Metrics(t, bytes.NewReader(b))
		changes := fams[map[string]string{"diff": "p2pcheck_diff_changes", "report": "p2pcheck_fabric_drift_changes"}[name]]
		if len(changes.GetMetric()) != len(drift.Kinds()) {
			t.Errorf("%s: %d kinds counted, want %d", name, len(changes.GetMetric()), len(drift.Kinds()))
		}
	}
}

// TestFabricRules runs the Prometheus rules of docs/diff.md with promtool test
// rules over the signature series the report writes for five nodes, one of
// them odd: the majority is counted, and the alert names the odd node only.
func TestFabricRules(t *testing.T) {
	bin := promtool(t)
	md, err := os.ReadFile("../docs/diff.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(md), "```yaml\n")
	rules, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/diff.md has no yaml block")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	var series []string
	for i, sig := range []string{"6ec56cdfad5ea551", "6ec56cdfad5ea551", "ea8fb0c0d310ea6c", "6ec56cdfad5ea551", "6ec56cdfad5ea551"} {
		reg := new(promtext.Registry)
		rep := sampleReport()
		if sig == rep.Golden.Signature {
			rep.Result, rep.Outcome = drift.Result{}, drift.OutcomeNone
		}
		FabricMetrics(reg, sig, &rep)
		for _, l := range strings.Split(string(textfile(t, reg)), "\n") {
			if l == "" || strings.HasPrefix(l, "#") {
				continue
			}
			name, value, _ := strings.Cut(l, " ")
			// The scrape adds the instance label.
			name = strings.Replace(name, "{", fmt.Sprintf(`{instance="node%02d",`, i+1), 1)
			if !strings.Contains(name, "{") {
				name += fmt.Sprintf(`{instance="node%02d"}`, i+1)
			}
			series = append(series, fmt.Sprintf("  - {series: '%s', values: '%sx12'}", name, value))
		}
	}
	test := `rule_files: [rules.yml]
evaluation_interval: 5m
tests:
- interval: 5m
  input_series:
` + strings.Join(series, "\n") + `
  alert_rule_test:
  - eval_time: 40m
    alertname: P2PCheckFabricOutsideMajority
    exp_alerts:
    - exp_labels: {severity: warning, instance: node03, signature: ea8fb0c0d310ea6c}
      exp_annotations:
        summary: "node03 has fabric signature ea8fb0c0d310ea6c, not the majority's: p2pcheck diff its snapshot against one of the majority"
  - eval_time: 40m
    alertname: P2PCheckFabricDrift
    exp_alerts:
    - exp_labels: {severity: critical, instance: node03}
      exp_annotations:
        summary: "node03: its fabric differs from the golden file in a way that changes peer-to-peer verdicts"
  promql_expr_test:
  - expr: p2pcheck:fabric_signature:nodes
    eval_time: 10m
    exp_samples:
    - {labels: 'p2pcheck:fabric_signature:nodes{signature="6ec56cdfad5ea551"}', value: 4}
    - {labels: 'p2pcheck:fabric_signature:nodes{signature="ea8fb0c0d310ea6c"}', value: 1}
`
	if err := os.WriteFile(filepath.Join(dir, "test.yml"), []byte(test), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "test", "rules", "test.yml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool test rules: %v\n%s\n%s", err, out, test)
	}
}
