package main

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/pcie"
)

const h2001GPU = "../../testdata/h200-1gpu-live/"

// TestH200LiveOffline reads the snapshot taken on a live H200 machine (redacted,
// NVML facts recorded) and compares each command's output with what the same
// binary printed live there, with no pci.ids on that machine. The report may differ
// only where a snapshot cannot know what a process knew: its time, the source,
// RLIMIT_MEMLOCK and the NCCL environment.
func TestH200LiveOffline(t *testing.T) {
	snap := h2001GPU + "snapshot.tar.gz"
	for _, tt := range []struct {
		golden string
		args   []string
		newer  []string // JSON fields the live build did not write yet
	}{
		{"topo.json", []string{"--format", "json", "topo"}, nil},
		// grid_devices and pairs came after the live capture (schema 1 only adds).
		{"matrix.json", []string{"--format", "json", "matrix"}, []string{"grid_devices", "pairs"}},
		{"matrix.txt", []string{"matrix"}, nil},
		{"pairs.json", []string{"--format", "json", "pairs"}, nil},
	} {
		t.Run(tt.golden, func(t *testing.T) { compareLiveOutput(t, snap, tt.golden, tt.args, tt.newer) })
	}
	t.Run("report.json", func(t *testing.T) { compareLiveReport(t, snap) })
	t.Run("redacted", func(t *testing.T) { checkRedacted(t, snap) })
}

// compareLiveOutput compares what p2pcheck args prints on snap with the live
// output in golden; newer are JSON fields written since the capture, which must
// be there and are left out of the comparison.
func compareLiveOutput(t *testing.T, snap, golden string, args, newer []string) {
	want, err := os.ReadFile(h2001GPU + golden)
	if err != nil {
		t.Fatal(err)
	}
	// That machine had no pci.ids at all: name none here either. A --pci-ids
	// that is missing is a usage error; one that is not a regular file leaves
	// the names out.
	noIDs := os.DevNull
	code, got, stderr := p2pcheck(append([]string{"--snapshot", snap, "--pci-ids", noIDs}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.HasSuffix(golden, ".json") {
		// The warnings name where pci.ids was looked for, which differs
		// between that machine and this one; everything else must not.
		for _, k := range newer {
			if !strings.Contains(got, `"`+k+`":`) {
				t.Errorf("the output lacks %q", k)
			}
		}
		want, got = withoutWarnings(t, want, newer...), string(withoutWarnings(t, []byte(got), newer...))
	}
	if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(got, "\n")); diff != "" {
		t.Errorf("snapshot output differs from the live one (-live +snapshot):\n%s", diff)
	}
}

// liveCheck is what the live report comparison keeps of a check.
type liveCheck struct{ ID, Status, Summary string }

// readLiveChecks maps a JSON report's checks by ID, "overall" to its overall
// status, leaving out what a snapshot cannot know (memlock_limit, nccl_env).
func readLiveChecks(t *testing.T, b []byte) map[string]liveCheck {
	t.Helper()
	var r struct {
		Overall string
		Checks  []liveCheck
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	m := map[string]liveCheck{"overall": {Status: r.Overall}}
	for _, c := range r.Checks {
		if c.ID != "memlock_limit" && c.ID != "nccl_env" {
			m[c.ID] = c
		}
	}
	return m
}

// compareLiveReport compares the report of snap with the one printed live:
// every check the capture holds compares exactly; a check added since is
// logged as new since the capture, not a failure.
func compareLiveReport(t *testing.T, snap string) {
	want, err := os.ReadFile(h2001GPU + "report.json")
	if err != nil {
		t.Fatal(err)
	}
	_, got, _ := p2pcheck("--snapshot", snap, "--format", "json", "report")
	live, offline := readLiveChecks(t, want), readLiveChecks(t, []byte(got))
	dropNewChecks(t, live, offline)
	if diff := cmp.Diff(live, offline); diff != "" {
		t.Errorf("checks differ (-live +snapshot):\n%s", diff)
	}
	if !strings.Contains(got, `"GPU-redacted-0"`) {
		t.Errorf("the recorded NVML facts are not in the report")
	}
}

// dropNewChecks removes from offline, with a log line each, the checks that
// live (a capture) does not hold: checks written since the capture.
func dropNewChecks[V any](t *testing.T, live, offline map[string]V) {
	t.Helper()
	var added []string
	for id := range offline {
		if _, ok := live[id]; !ok {
			added = append(added, id)
			delete(offline, id)
		}
	}
	slices.Sort(added)
	for _, id := range added {
		t.Logf("check %s: new since the capture, not compared", id)
	}
}

// checkRedacted asserts that snap holds no VPD, serial numbers or Device
// Serial Numbers, and holds config files.
func checkRedacted(t *testing.T, snap string) {
	f, err := os.Open(snap)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	configs := 0
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(hdr.Name, "/vpd") || strings.HasSuffix(hdr.Name, "/serial_number") {
			t.Errorf("%s captured", hdr.Name)
		}
		if strings.HasSuffix(hdr.Name, "/config") && checkDSNZeroed(t, hdr.Name, tr) {
			configs++
		}
	}
	if configs == 0 {
		t.Errorf("no config files in the snapshot")
	}
}

// checkDSNZeroed reads one config file from r and reports whether it parsed;
// a Device Serial Number capability in it must hold zeros.
func checkDSNZeroed(t *testing.T, name string, r io.Reader) bool {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pcie.ParseConfig(b)
	if err != nil {
		return false
	}
	for _, e := range c.ExtCapabilities {
		if e.ID == 0x0003 && int(e.Offset)+12 <= len(b) && strings.Trim(string(b[e.Offset+4:e.Offset+12]), "\x00") != "" {
			t.Errorf("%s: Device Serial Number % x not zeroed", name, b[e.Offset+4:e.Offset+12])
		}
	}
	return true
}

// withoutWarnings returns a JSON object without its "warnings" member and the
// members named in also, indented.
func withoutWarnings(t *testing.T, b []byte, also ...string) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "warnings")
	for _, k := range also {
		delete(m, k)
	}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return out
}
