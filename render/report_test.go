package render_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/internal/fixture"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/render"
	"github.com/p2pkit/p2pkit/snapshot"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// machineReport builds the report of a named fixture, or of the H200 capture
// for "h200-2gpu-vm", read as a snapshot without pci.ids names.
func machineReport(t *testing.T, name string) check.Report {
	t.Helper()
	var fsys hostfs.Root
	var err error
	if name == "h200-2gpu-vm" {
		fsys, err = snapshot.Open("../testdata/h200-2gpu-vm/snapshot.tar.gz")
	} else {
		var m *fixture.Machine
		if m, err = fixture.ByName(name); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := m.Write(dir); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Lstat(filepath.Join(dir, "dev/gdrdrv")); err == nil && fi.Mode()&os.ModeCharDevice == 0 {
			t.Skip("this fixture's /dev/gdrdrv is a device node only when written as root")
		}
		fsys, err = hostfs.Open(dir)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	n, err := node.Load(fsys, node.Options{NoNames: true})
	if err != nil {
		t.Fatal(err)
	}
	f := check.NewFacts(n, check.Inputs{Source: check.Snapshot, NoNVML: "NVML not queried: a snapshot carries no NVML state"})
	res, err := check.Run(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	return check.NewReport(f, res, check.Meta{ToolVersion: "v1.0.0", Hostname: "node1", Timestamp: time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)})
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	path = filepath.Join("testdata", path)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(string(got), "\n")); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

// TestReportText compares the text report of representative machines with
// testdata/report/<machine>.txt, plain and colored.
func TestReportText(t *testing.T) {
	for _, name := range []string{"dgx-h100", "dgx-h100-nonroot", "degraded-link", "amd-epyc", "h200-2gpu-vm"} {
		t.Run(name, func(t *testing.T) {
			r := machineReport(t, name)
			var plain, color bytes.Buffer
			if err := render.ReportText(&plain, r, render.Style{}); err != nil {
				t.Fatal(err)
			}
			golden(t, "report/"+name+".txt", plain.Bytes())
			if err := render.ReportText(&color, r, render.Style{Color: true}); err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(plain.Bytes(), []byte("\x1b[")) || !bytes.Contains(color.Bytes(), []byte("\x1b[")) {
				t.Errorf("escape sequences: plain %t, color %t; want only in color", bytes.Contains(plain.Bytes(), []byte("\x1b[")), bytes.Contains(color.Bytes(), []byte("\x1b[")))
			}
			last := lastLine(plain.String())
			if !strings.HasPrefix(last, "fix first: ") {
				t.Errorf("last line %q, want the fix-first line", last)
			}
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestReportTextTruncates: more findings than maxFindings are cut with a pointer
// to the JSON.
func TestReportTextTruncates(t *testing.T) {
	r := check.Report{Overall: check.Warn, Checks: []check.Result{{ID: "pcie_link", Status: check.Warn, Summary: "s"}}}
	for i := range 10 {
		r.Checks[0].Findings = append(r.Checks[0].Findings, check.Finding{Subject: string(rune('a' + i)), Status: check.Warn, Message: "m"})
	}
	var b bytes.Buffer
	if err := render.ReportText(&b, r, render.Style{}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(b.String(), ": m\n"); got != 8 {
		t.Errorf("%d findings printed, want 8", got)
	}
	if !strings.Contains(b.String(), "... 2 more in --format json") {
		t.Errorf("no truncation note in:\n%s", b.String())
	}
}
