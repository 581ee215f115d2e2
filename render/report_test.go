package render_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/render"
)

// machineReport builds the report of a named fixture as p2pcheck --root builds
// it, or of the H200 capture for "h200-2gpu-vm" as p2pcheck --snapshot does,
// without pci.ids names. These are the reports whose text p2pcheck's own test
// compares with the same testdata/report files.
func machineReport(t *testing.T, name string) check.Report {
	t.Helper()
	opt := node.Options{NoNames: true}
	var n *node.Node
	var in check.Inputs
	if name == "h200-2gpu-vm" {
		n = testnode.Snapshot(t, "../testdata/h200-2gpu-vm/snapshot.tar.gz", opt)
		in = check.Inputs{Source: check.Snapshot, NoNVML: "NVML not queried: a snapshot carries no NVML state"}
	} else {
		n = testnode.Root(t, testsupport.RootWithDevices(t, testsupport.Fixture(t, name)), opt)
		in = check.Inputs{Source: check.Root, NoNVML: "NVML not queried: it describes this machine, not the tree under --root"}
	}
	f := check.NewFacts(n, in)
	res, err := check.Run(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	return check.NewReport(f, res, check.Meta{ToolVersion: "v1.0.0", Hostname: "node1", Timestamp: time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)})
}

// TestReportText compares the text report of representative machines with
// testdata/report/<machine>.txt, plain and colored.
func TestReportText(t *testing.T) {
	for _, name := range []string{"dgx-h100", "dgx-h100-acs-off", "dgx-h100-nonroot", "degraded-link", "amd-epyc", "h200-2gpu-vm"} {
		t.Run(name, func(t *testing.T) {
			r := machineReport(t, name)
			var plain, color bytes.Buffer
			if err := render.ReportText(&plain, r, render.Style{}); err != nil {
				t.Fatal(err)
			}
			testsupport.Golden(t, "testdata/report/"+name+".txt", plain.Bytes())
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
