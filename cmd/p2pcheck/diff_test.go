package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
)

// writeSnap writes m as a snapshot file in dir and returns its path.
func writeSnap(t *testing.T, m *fixture.Machine, dir, name string) string {
	t.Helper()
	var b bytes.Buffer
	if err := m.WriteSnapshot(&b); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".tar.gz")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDiffCommand runs p2pcheck diff on dgx-h100 (ACS redirect on the PEX
// switch ports) against dgx-h100-acs-off as the golden: every form gives the
// same comparison, and the exit code says what drifted.
func TestDiffCommand(t *testing.T) {
	dir := t.TempDir()
	golden := writeSnap(t, fixture.DGXH100ACSOff(), dir, "golden")
	acsOn := writeSnap(t, fixture.DGXH100Like(), dir, "acs-on")
	kernel := writeSnap(t, fixture.DGXH100ACSOff().Kernel("6.8.0-61-generic"), dir, "kernel")

	code, out, errOut := p2pcheck("diff", golden, acsOn)
	if code != exitFail || !strings.Contains(out, "check acs_path pass → fail") ||
		!strings.Contains(out, "result: drift that changes verdicts (exit 1)") {
		t.Errorf("diff golden acs-on: exit %d, stderr %q:\n%s", code, errOut, out)
	}
	if code2, out2, _ := p2pcheck("--snapshot", acsOn, "diff", golden); code2 != code || out2 != strings.Replace(out, "snapshot "+acsOn, "snapshot "+acsOn, 1) {
		t.Errorf("--snapshot NODE diff GOLDEN differs from diff GOLDEN NODE: exit %d\n%s", code2, out2)
	}
	if code, out, _ := p2pcheck("diff", golden, golden); code != exitOK || !strings.Contains(out, "result: no drift (exit 0)") {
		t.Errorf("diff golden golden: exit %d:\n%s", code, out)
	}
	if code, out, _ := p2pcheck("diff", golden, kernel); code != exitOK || !strings.Contains(out, "kernel 6.8.0-60-generic → 6.8.0-61-generic") {
		t.Errorf("a kernel update: exit %d, want 0:\n%s", code, out)
	}
	if code, _, _ := p2pcheck("diff", golden, kernel, "--fail-on=warn"); code != exitWarn {
		t.Errorf("a kernel update with --fail-on=warn: exit %d, want %d", code, exitWarn)
	}

	validate := testsupport.Schema(t, "../../schema/diff.v1.json")
	code, out, _ = p2pcheck("diff", golden, acsOn, "--format", "json")
	if err := validate([]byte(out)); err != nil {
		t.Errorf("diff --format json does not follow schema/diff.v1.json: %v\n%s", err, out)
	}
	var doc struct {
		Outcome  string         `json:"outcome"`
		ExitCode int            `json:"exit_code"`
		Counts   map[string]int `json:"counts"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Outcome != "verdict" || doc.ExitCode != code || doc.Counts["acs"] != 26 {
		t.Errorf("JSON: outcome %q, exit_code %d (exit %d), counts %v, %v", doc.Outcome, doc.ExitCode, code, doc.Counts, err)
	}
}

// TestDiffFleetFiles: --prometheus and --nfd describe the comparison in files
// node_exporter and node-feature-discovery read, named apart from the report's.
func TestDiffFleetFiles(t *testing.T) {
	dir := t.TempDir()
	golden := writeSnap(t, fixture.DGXH100ACSOff(), dir, "golden")
	acsOn := writeSnap(t, fixture.DGXH100Like(), dir, "acs-on")
	prom, nfd := filepath.Join(dir, "diff.prom"), filepath.Join(dir, "diff.nfd")
	if code, _, errOut := p2pcheck("diff", golden, acsOn, "--prometheus", prom, "--nfd", nfd); code != exitFail {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	fams := testsupport.MetricsFile(t, prom)
	for name, want := range map[string]float64{"p2pcheck_diff_outcome": 2, "p2pcheck_diff_exit_code": 1} {
		if f := fams[name]; f == nil || f.Metric[0].GetGauge().GetValue() != want {
			t.Errorf("%s: %v, want %v", name, f, want)
		}
	}
	acs := 0.0
	for _, m := range fams["p2pcheck_diff_changes"].GetMetric() {
		if m.GetLabel()[0].GetValue() == "acs" {
			acs = m.GetGauge().GetValue()
		}
	}
	if acs != 26 || len(fams["p2pcheck_diff_changes"].GetMetric()) != 10 {
		t.Errorf("p2pcheck_diff_changes: acs %v of %d kinds", acs, len(fams["p2pcheck_diff_changes"].GetMetric()))
	}
	for name := range fams {
		if !strings.HasPrefix(name, "p2pcheck_diff_") {
			t.Errorf("%s: a diff textfile metric outside p2pcheck_diff_* could collide with the report's", name)
		}
	}
	b, err := os.ReadFile(nfd)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"feature.node.kubernetes.io/p2pcheck.drift=verdict\n", "feature.node.kubernetes.io/p2pcheck.drift.acs=26\n", "# +expiry-time="} {
		if !strings.Contains(string(b), want) {
			t.Errorf("NFD file lacks %q:\n%s", want, b)
		}
	}
}

// TestReportFabricSignature: the report's textfile carries the fabric
// signature, and with --golden the drift counts; the signature is the one diff
// prints.
func TestReportFabricSignature(t *testing.T) {
	dir := t.TempDir()
	golden := writeSnap(t, fixture.DGXH100ACSOff(), dir, "golden")
	acsOn := writeSnap(t, fixture.DGXH100Like(), dir, "acs-on")
	prom := filepath.Join(dir, "p2pcheck.prom")
	p2pcheck("--snapshot", acsOn, "--quick", "--prometheus", prom, "--golden", golden)
	fams := testsupport.MetricsFile(t, prom)
	_, out, _ := p2pcheck("diff", golden, acsOn, "--format", "json")
	var doc struct{ Golden, Node struct{ Signature string } }
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	label := func(family string) string {
		for _, l := range fams[family].GetMetric()[0].GetLabel() {
			if l.GetName() == "signature" {
				return l.GetValue()
			}
		}
		return ""
	}
	sig, gsig := label("p2pcheck_fabric_signature_info"), label("p2pcheck_fabric_golden_signature_info")
	if sig != doc.Node.Signature || gsig != doc.Golden.Signature {
		t.Errorf("textfile signatures %s (golden %s), diff's %s (golden %s)", sig, gsig, doc.Node.Signature, doc.Golden.Signature)
	}
	if v := fams["p2pcheck_fabric_drift_outcome"].GetMetric()[0].GetGauge().GetValue(); v != 2 {
		t.Errorf("p2pcheck_fabric_drift_outcome %v, want 2", v)
	}
	if code, _, _ := p2pcheck("--snapshot", acsOn, "--golden", golden); code != exitUsage {
		t.Errorf("--golden without --prometheus: exit %d, want %d", code, exitUsage)
	}
}

// TestDiffCannotCompare: a golden that is missing, not a snapshot, or a FIFO
// (refused without waiting for a writer) is exit 3; a bad command line 64.
func TestDiffCannotCompare(t *testing.T) {
	dir := t.TempDir()
	node := writeSnap(t, fixture.SRIOVNIC(), dir, "node")
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk.tar.gz")
	if err := os.WriteFile(junk, []byte("not gzip"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, golden := range []string{filepath.Join(dir, "missing.tar.gz"), fifo, junk} {
		if code, _, errOut := p2pcheck("diff", golden, node); code != exitNoEval || errOut == "" {
			t.Errorf("diff %s: exit %d (%q), want %d", golden, code, errOut, exitNoEval)
		}
	}
	for _, args := range [][]string{
		{"diff"}, {"diff", node, node, node}, {"diff", "--fleet"}, {"--root", dir, "diff", node, node},
		{"diff", "--fleet", dir, "--format", "dot"}, {"diff", "--fleet", dir, "--prometheus", "x"}, {"diff", node, node, "--fail-on", "x"},
	} {
		if code, _, _ := p2pcheck(args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

// TestDiffDotCommand: --format dot draws the golden with the drift marked, and
// Graphviz reads it.
func TestDiffDotCommand(t *testing.T) {
	dotBin, err := exec.LookPath("dot")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("graphviz is required in CI")
		}
		t.Skip("graphviz not installed")
	}
	dir := t.TempDir()
	golden := writeSnap(t, fixture.DGXH100ACSOff(), dir, "golden")
	m := fixture.DGXH100ACSOff()
	m.Func("gpu3").Set(fixture.Trained(4, 8))
	node := writeSnap(t, m, dir, "node")
	code, out, _ := p2pcheck("diff", golden, node, "--format", "dot")
	if code != exitFail || !strings.Contains(out, "Δ link Gen5 x16 → Gen4 x8 (downgraded)") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	cmd := exec.Command(dotBin, "-Tsvg", "-o", os.DevNull)
	cmd.Stdin = strings.NewReader(out)
	if b, err := cmd.CombinedOutput(); err != nil || len(b) > 0 {
		t.Errorf("dot: %v %s", err, b)
	}
}

// fleetMachines is the fleet the README shows: twelve DGX H100 nodes with
// their ACS fixed, each with its own host name; node07 came back from a repair
// with GPU3 at Gen4 x8, and a BIOS update turned ACS redirect back on in
// node11.
func fleetMachines() map[string]*fixture.Machine {
	out := map[string]*fixture.Machine{}
	for i := 1; i <= 12; i++ {
		name := fmt.Sprintf("node%02d", i)
		m := fixture.DGXH100ACSOff()
		switch i {
		case 7:
			m.Func("gpu3").Set(fixture.Trained(4, 8))
		case 11:
			m = fixture.DGXH100Like()
		}
		out[name] = m.File("proc/sys/kernel/hostname", name+"\n")
	}
	return out
}

// TestDiffFleet runs diff --fleet over the README's fleet: the majority of ten
// is named, node07 and node11 are each one group with their differences, and
// the output is testdata/diff/fleet.log, the README's example (-update
// rewrites it).
func TestDiffFleet(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fleet")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, m := range fleetMachines() {
		writeSnap(t, m, dir, name)
	}
	code, out, errOut := p2pcheck("diff", "--fleet", dir)
	if code != exitFail || errOut != "" {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"fleet: 12 nodes, 3 fabric signatures", "majority: 10 of 12 nodes", "1 node: node07 (signature",
		"GPU3 0000:40:00.0: link Gen5 x16 → Gen4 x8 (downgraded) (new downgrade)", "1 node: node11 (signature"} {
		if !strings.Contains(out, want) {
			t.Errorf("fleet output lacks %q:\n%s", want, out)
		}
	}
	log := "$ p2pcheck diff --fleet /tmp/fleet\n" + strings.ReplaceAll(out, dir, "/tmp/fleet") + fmt.Sprintf("rc=%d\n", code)
	testsupport.Golden(t, "../../testdata/diff/fleet.log", []byte(log))

	_, js, _ := p2pcheck("diff", "--fleet", dir, "--format", "json")
	if err := testsupport.Schema(t, "../../schema/diff.v1.json")([]byte(js)); err != nil {
		t.Errorf("diff --fleet --format json does not follow schema/diff.v1.json: %v", err)
	}
}

// TestListFleet: a fleet directory's snapshots and roots are taken in name
// order and named by file name, other files are not; a root or a file named
// alone is one machine; two machines of one name are named by path.
func TestListFleet(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"b.tar.gz", "a.tar.gz", "notes.txt", "node3/sys/bus", "other/x", "second/a.tar.gz"} {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(p, "bus") {
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		} else if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	src, err := listFleet([]string{dir, filepath.Join(dir, "second", "a.tar.gz")})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "a.tar.gz"), "b", "node3", filepath.Join(dir, "second", "a.tar.gz")}
	if diff := cmp.Diff(want, src.names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if _, err := listFleet([]string{filepath.Join(dir, "missing")}); err == nil {
		t.Error("a missing fleet directory is no error")
	}
}
