package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/roottest"
)

// TestVMRequireP2P: in a VM a required p2p that nothing confirms is unknown, exit
// 3 (issue #23 item 10): the vm-acs fixture and the 2-GPU H200 VM capture under
// --require p2p. A snapshot of that VM taken with NVML answering records NVML's
// P2P status (p2pkit/nvml.json), and the offline report then judges it: OK, exit 0.
func TestVMRequireP2P(t *testing.T) {
	for _, tt := range []struct {
		name string
		src  []string
	}{
		{"vm-acs", []string{"--root", machineRoot(t, "vm-acs")}},
		{"h200-2gpu-vm", []string{"--snapshot", h200Snapshot}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, stderr := p2pcheck(append(tt.src, "--require", "p2p", "--check", "nvml_p2p_status")...)
			if code != exitNoEval {
				t.Errorf("exit %d, want %d:\n%s%s", code, exitNoEval, out, stderr)
			}
		})
	}

	b, err := os.ReadFile("../../gpu/testdata/h200-2gpu-vm/facts.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	probe := func() (*gpu.Facts, error) {
		var f gpu.Facts
		return &f, json.Unmarshal(b, &f)
	}
	oldProbe, oldLinks := probeNVML, probeNVMLLinks
	probeNVML, probeNVMLLinks, nvmlOnRoot = probe, probe, true
	defer func() { probeNVML, probeNVMLLinks, nvmlOnRoot = oldProbe, oldLinks, false }()
	root := t.TempDir()
	roottest.Unpack(t, h200Snapshot, root)
	snap := filepath.Join(t.TempDir(), "snap.tar.gz")
	if code, _, stderr := p2pcheck("--root", root, "snapshot", "-o", snap); code != 0 {
		t.Fatalf("snapshot: exit %d: %s", code, stderr)
	}
	probeNVML, probeNVMLLinks, nvmlOnRoot = oldProbe, oldLinks, false
	code, out, stderr := p2pcheck("--snapshot", snap, "--require", "p2p", "--check", "nvml_p2p_status", "--format", "json")
	if code != exitOK {
		t.Errorf("snapshot with NVML's P2P status: exit %d, want %d:\n%s%s", code, exitOK, out, stderr)
	}
	var rep struct {
		Checks []struct{ ID, Status string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Checks) != 1 || rep.Checks[0].Status != "pass" {
		t.Errorf("nvml_p2p_status from the snapshot = %+v (%v), want pass", rep.Checks, err)
	}
}
