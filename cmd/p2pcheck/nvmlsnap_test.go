package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/roottest"
	"github.com/p2pkit/p2pkit/snapshot"
)

// TestSnapshotKeepsNVML runs every command on a machine with NVML facts (the H200
// capture unpacked as a --root tree, NVML's answers injected from the recorded
// probe of that machine) and on a snapshot taken of it: the outputs must be the
// same, NVLink classes and GPU facts included, but for the report's source.
func TestSnapshotKeepsNVML(t *testing.T) {
	b, err := os.ReadFile("../../gpu/testdata/h200-2gpu-vm/facts.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	// The recorded probe could not read UUIDs; give the GPUs some.
	probe := func() (*gpu.Facts, error) {
		var f gpu.Facts
		err := json.Unmarshal(b, &f)
		for i := range f.GPUs {
			f.GPUs[i].UUID = fmt.Sprintf("GPU-5028283b-f657-292f-32ee-e15f162148%02d", i)
		}
		return &f, err
	}
	oldProbe, oldLinks := probeNVML, probeNVMLLinks
	probeNVML, probeNVMLLinks, nvmlOnRoot = probe, probe, true
	defer func() { probeNVML, probeNVMLLinks, nvmlOnRoot = oldProbe, oldLinks, false }()

	root := t.TempDir()
	roottest.Unpack(t, h200Snapshot, root)
	snap := filepath.Join(t.TempDir(), "snap.tar.gz")
	// Unredacted, so that the report's GPU UUIDs are the same.
	if code, _, stderr := p2pcheck("--root", root, "snapshot", "--no-redact", "-o", snap); code != 0 {
		t.Fatalf("snapshot: exit %d: %s", code, stderr)
	}
	commands := [][]string{
		{"topo"}, {"matrix"}, {"pairs"}, {"pairs", "--all"}, {"pair", "gpu0", "gpu1"}, {"gdr"},
		{"report"}, {"report", "--quick"}, {"--check", "nvml_p2p_status"},
	}
	nvlinkSeen := false
	for _, cmd := range commands {
		for _, format := range []string{"text", "json"} {
			args := append([]string{"--format", format}, cmd...)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				liveCode, live, liveErr := p2pcheck(append([]string{"--root", root}, args...)...)
				snapCode, offline, snapErr := p2pcheck(append([]string{"--snapshot", snap}, args...)...)
				// The one thing that differs: where the facts came from.
				live = strings.ReplaceAll(live, `"source": "root"`, `"source": "snapshot"`)
				live = strings.ReplaceAll(live, "p2pcheck report (root,", "p2pcheck report (snapshot,")
				if liveCode != snapCode {
					t.Errorf("exit %d live, %d on the snapshot (%s | %s)", liveCode, snapCode, liveErr, snapErr)
				}
				if diff := cmp.Diff(strings.Split(live, "\n"), strings.Split(offline, "\n")); diff != "" {
					t.Errorf("live and snapshot outputs differ (-live +snapshot):\n%s", diff)
				}
				if strings.Contains(offline, "NV18") {
					nvlinkSeen = true
				}
			})
		}
	}
	if !nvlinkSeen {
		t.Errorf("no output showed the GPUs' NV18: the NVML facts were not used")
	}

	// By default the UUIDs are redacted, and the manifest says so.
	redacted := filepath.Join(t.TempDir(), "redacted.tar.gz")
	if code, _, stderr := p2pcheck("--root", root, "snapshot", "-o", redacted); code != 0 {
		t.Fatalf("snapshot: exit %d: %s", code, stderr)
	}
	_, out, _ := p2pcheck("--snapshot", redacted, "--format", "json", "report")
	f, _ := probe()
	if !strings.Contains(out, `"GPU-redacted-0"`) || strings.Contains(out, f.GPUs[0].UUID) {
		t.Errorf("UUIDs not redacted: %s", out)
	}
	m, err := snapshot.ReadManifest(testsupport.OpenSnapshot(t, redacted))
	if err != nil || m == nil || !m.NVML || !slices.Contains(m.Redacted, "gpu_uuid") {
		t.Errorf("manifest %+v, %v: want NVML facts and gpu_uuid redacted", m, err)
	}
}

// TestTruncatedSnapshot captures a machine seen without root (config cut to 64
// bytes): the capture warns, and reading the snapshot says it is truncated.
func TestTruncatedSnapshot(t *testing.T) {
	root := testsupport.Root(t, fixture.NonRoot(testsupport.Fixture(t, "dgx-h100")))
	snap := filepath.Join(t.TempDir(), "snap.tar.gz")
	code, _, stderr := p2pcheck("--root", root, "snapshot", "-o", snap)
	if code != 0 || !strings.Contains(stderr, "captured truncated to 64 bytes") {
		t.Errorf("snapshot: exit %d, stderr %q; want a warning about truncated config space", code, stderr)
	}
	_, _, stderr = p2pcheck("--snapshot", snap, "topo")
	if !strings.Contains(stderr, "the snapshot holds truncated config space") {
		t.Errorf("reading it: stderr %q, want the truncation warning", stderr)
	}
}
