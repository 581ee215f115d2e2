package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// reportJSON runs the JSON report and decodes the fields these tests look at.
func reportJSON(t *testing.T, args ...string) (code int, rep struct {
	Requirements []string `json:"requirements"`
	ExitCode     int      `json:"exit_code"`
	Checks       []struct {
		ID       string `json:"id"`
		Status   string `json:"status"`
		Observed string `json:"observed"`
	} `json:"checks"`
}) {
	t.Helper()
	code, out, stderr := p2pcheck(append([]string{"--format", "json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("exit %d, output is not JSON: %v\n%s", code, err, stderr)
	}
	return code, rep
}

func TestRequireFlagAndConfig(t *testing.T) {
	root := machineRoot(t, "degraded-link")
	conf := filepath.Join(t.TempDir(), "p2pcheck.conf")
	if err := os.WriteFile(conf, []byte("# node role\nrequire = gdrcopy, p2p\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"default", nil, []string{"p2p", "gdr"}},
		{"flag", []string{"--require", "nvme-p2p,gdr"}, []string{"gdr", "nvme-p2p"}},
		{"config", []string{"--config", conf}, []string{"p2p", "gdrcopy"}},
		{"flag wins over config", []string{"--config", conf, "--require", "gdr"}, []string{"gdr"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, rep := reportJSON(t, append([]string{"--root", root}, tt.args...)...)
			if diff := cmp.Diff(tt.want, rep.Requirements); diff != "" {
				t.Errorf("requirements (-want +got):\n%s", diff)
			}
			if code != rep.ExitCode {
				t.Errorf("exit %d, JSON exit_code %d", code, rep.ExitCode)
			}
		})
	}
	bad := filepath.Join(t.TempDir(), "bad.conf")
	if err := os.WriteFile(bad, []byte("require = rdma\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--require", "rdma"},
		{"--require", ""},
		{"--config", bad},
		{"--config", filepath.Join(t.TempDir(), "absent.conf")},
		{"--aer-threshold", "0"},
	} {
		if code, _, stderr := p2pcheck(append([]string{"--root", root}, args...)...); code != exitUsage {
			t.Errorf("%v: exit %d (%s), want %d", args, code, strings.TrimSpace(stderr), exitUsage)
		}
	}
}

// TestAERGrowthAcrossRuns: the second run reads the counters the first run's
// --prometheus file kept and judges their growth.
func TestAERGrowthAcrossRuns(t *testing.T) {
	root := machineRoot(t, "degraded-link")
	prom := filepath.Join(t.TempDir(), "p2pcheck.prom")
	aer := func() string {
		_, rep := reportJSON(t, "--root", root, "--prometheus", prom, "--aer-threshold", "10")
		for _, c := range rep.Checks {
			if c.ID == "aer_errors" {
				return c.Status + ": " + c.Observed
			}
		}
		t.Fatal("no aer_errors")
		return ""
	}
	if got := aer(); !strings.HasPrefix(got, "warn: ") || !strings.Contains(got, "0 compared with the previous run") {
		t.Errorf("first run: aer_errors %q, want a warning on 37 since boot (threshold 10)", got)
	}
	if got := aer(); !strings.HasPrefix(got, "pass: ") || !strings.Contains(got, "1 compared with the previous run") {
		t.Errorf("second run: aer_errors %q, want a pass: no growth since the first run", got)
	}
}
