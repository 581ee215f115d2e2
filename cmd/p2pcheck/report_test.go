package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
)

const h200Snapshot = "../../testdata/h200-2gpu-vm/snapshot.tar.gz"

func init() {
	hostname = func() (string, error) { return "node1", nil }
	now = func() time.Time { return time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC) }
}

// machineRoot writes a named fixture, with its device nodes, and returns its
// root directory.
func machineRoot(t *testing.T, name string) string {
	t.Helper()
	return testsupport.RootWithDevices(t, testsupport.Fixture(t, name))
}

// p2pcheck runs the command line and returns its exit code and output.
func p2pcheck(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestReportGolden runs the report on fixtures and the H200 capture, as
// "p2pcheck" and as "p2pcheck report", and compares the text with
// render/testdata/report/<machine>.txt, which render's test writes from the
// report it builds as p2pcheck does: the command adds the exit code, the source
// and NVML's absence to what the renderer shows.
func TestReportGolden(t *testing.T) {
	for _, tt := range []struct {
		name string
		code int
	}{
		{"dgx-h100", exitFail},
		{"dgx-h100-acs-off", exitOK},
		{"dgx-h100-nonroot", exitNoEval},
		// Two GPUs and no RDMA NIC on both, and nothing says that is what they
		// are built with: gdr, required by default, has nothing to judge.
		{"degraded-link", exitNoEval},
		// Two GPUs in a VM and a snapshot without NVML: nothing confirms P2P, which
		// the default requirements need (issue #23 item 10).
		{"h200-2gpu-vm", exitNoEval},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := []string{"--snapshot", h200Snapshot}
			if tt.name != "h200-2gpu-vm" {
				src = []string{"--root", machineRoot(t, tt.name)}
			}
			code, out, _ := p2pcheck(src...)
			if code != tt.code {
				t.Errorf("exit %d, want %d", code, tt.code)
			}
			testsupport.Compare(t, "../../render/testdata/report/"+tt.name+".txt", "./render", []byte(out))
			code2, out2, _ := p2pcheck(append([]string{"report"}, src...)...)
			if code2 != code || out2 != out {
				t.Errorf("'p2pcheck report' (exit %d) differs from 'p2pcheck' (exit %d)", code2, code)
			}
		})
	}
}

// TestExitCodes: the exit code follows check/exitcode.go and the JSON overall and
// exit_code always agree with it.
func TestExitCodes(t *testing.T) {
	degraded := machineRoot(t, "degraded-link")
	for _, tt := range []struct {
		name    string
		args    []string
		code    int
		overall check.Status
		stderr  string
	}{
		{"gdrdrv warns by default", []string{"--root", degraded, "--expect", "gpus=2"}, exitOK, check.Warn, ""},
		// Two GPUs and no RDMA NIC: gdr, required by default, has nothing to judge.
		{"nothing to judge", []string{"--root", degraded}, exitNoEval, check.Unknown, ""},
		{"a GPU missing", []string{"--root", degraded, "--expect", "gpus=3,rdma-nics=0"}, exitFail, check.Fail, ""},
		{"bad expect", []string{"--root", degraded, "--expect", "nics=2"}, exitUsage, "", `--expect: check: expectation: unknown kind "nics"`},
		{"fail", []string{"--root", degraded, "--require", "p2p,gdr,gdrcopy"}, exitFail, check.Fail, ""},
		{"warn passes", []string{"--root", degraded, "--check", "pcie_link"}, exitOK, check.Warn, ""},
		{"warn with --fail-on=warn", []string{"--root", degraded, "--check", "pcie_link", "--fail-on=warn"}, exitWarn, check.Warn, ""},
		{"pass", []string{"--root", degraded, "--check", "acs_path", "--check", "iommu_mode", "--fail-on", "warn"}, exitOK, check.Pass, ""},
		{"gdr", []string{"gdr", "--root", degraded}, exitFail, check.Fail, ""},
		{"unknown check", []string{"--root", degraded, "--check", "acs"}, exitUsage, "", "valid checks: inventory, p2p_reachability, virtualization"},
		{"bad fail-on", []string{"--root", degraded, "--fail-on", "skip"}, exitUsage, "", "--fail-on must be fail or warn"},
		{"quick and probe", []string{"--root", degraded, "--quick", "--probe"}, exitUsage, "", "exclude each other"},
		{"no root", []string{"--root", filepath.Join(degraded, "missing")}, exitNoEval, "", "no such file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := p2pcheck(tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, tt.code, tt.stderr)
			}
			if tt.overall == "" {
				return
			}
			code, out, _ := p2pcheck(append(tt.args, "--format", "json")...)
			var rep struct {
				Overall  check.Status `json:"overall"`
				ExitCode int          `json:"exit_code"`
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.Overall != tt.overall || rep.ExitCode != code || code != tt.code {
				t.Errorf("json overall %s exit_code %d, process exit %d; want %s and %d", rep.Overall, rep.ExitCode, code, tt.overall, tt.code)
			}
		})
	}
}

// TestGdrCommand: "p2pcheck gdr" runs the GDRCopy checks only.
func TestGdrCommand(t *testing.T) {
	_, out, _ := p2pcheck("gdr", "--snapshot", h200Snapshot, "--format", "json")
	var rep check.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range rep.Checks {
		ids = append(ids, c.ID)
	}
	if diff := cmp.Diff(check.GDRIDs, ids); diff != "" {
		t.Errorf("gdr checks (-want +got):\n%s", diff)
	}
	if rep.FixFirst == nil || rep.FixFirst.ID != "gdrdrv" {
		t.Errorf("fix first %+v, want gdrdrv", rep.FixFirst)
	}
}

// TestQuick: --quick never asks NVML and says so.
func TestQuick(t *testing.T) {
	code, out, stderr := p2pcheck("--quick", "--check", "nvml_p2p_status", "--format", "json")
	if code == exitNoEval {
		t.Skipf("this machine has no PCI sysfs: %s", stderr)
	}
	var rep check.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(rep.Checks) != 1 || rep.Checks[0].Status != check.Skip || !strings.Contains(rep.Checks[0].Summary, "--quick") {
		t.Errorf("checks %+v, want nvml_p2p_status skipped for --quick", rep.Checks)
	}
	if rep.Environment.Source != check.Live {
		t.Errorf("source %s, want live", rep.Environment.Source)
	}
}

// TestFleetFiles: --prometheus and --nfd write their files atomically, leaving
// nothing else in the directory.
func TestFleetFiles(t *testing.T) {
	root := machineRoot(t, "degraded-link")
	dir := t.TempDir()
	prom, nfd := filepath.Join(dir, "p2pcheck.prom"), filepath.Join(dir, "p2pcheck")
	if code, _, stderr := p2pcheck("--root", root, "--require", "gdrcopy", "--prometheus", prom, "--nfd", nfd, "--nfd-expiry", "30m"); code != exitFail {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{"p2pcheck", "p2pcheck.prom"}, names); diff != "" {
		t.Errorf("directory (-want +got):\n%s", diff)
	}
	fams := testsupport.MetricsFile(t, prom)
	if g := fams["p2pcheck_overall_status"]; g == nil || g.GetMetric()[0].GetGauge().GetValue() != 2 {
		t.Errorf("p2pcheck_overall_status = %v, want 2 (fail)", g)
	}
	b, err := os.ReadFile(nfd)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# +expiry-time=2026-11-30T05:30:00Z\n", "feature.node.kubernetes.io/p2pcheck.ready=false\n", "feature.node.kubernetes.io/p2pcheck.check.gdrdrv=fail\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("NFD file lacks %q:\n%s", want, b)
		}
	}
}
