package main

import (
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
)

// TestTreeCommandsGolden runs topo, matrix, pair and pairs on fixtures and compares
// their text with testdata/tree/<name>.txt (go test -update rewrites them).
func TestTreeCommandsGolden(t *testing.T) {
	ids := "--pci-ids=../../internal/pciids/testdata/pci.ids"
	tests := []struct {
		name, machine string
		args          []string
	}{
		{"topo-classes", "classes", []string{"topo", ids}},
		{"topo-degraded-link", "degraded-link", []string{"topo", ids}},
		{"matrix-amd-epyc", "amd-epyc", []string{"matrix", "--no-nvml"}},
		{"pair-amd-epyc-nic0-gpu0", "amd-epyc", []string{"pair", "NIC0", "gpu0", ids}},
		{"pairs-sriov-nic", "sriov-nic", []string{"pairs"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := machineRoot(t, tt.machine)
			code, out, errOut := p2pcheck(append([]string{"--root", root, "--no-color"}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			testsupport.Golden(t, "testdata/tree/"+tt.name+".txt", []byte(out))
		})
	}
}

func TestTopoDotFormat(t *testing.T) {
	root := machineRoot(t, "dgx-h100")
	code, out, errOut := p2pcheck("--root", root, "topo", "--format", "dot")
	if code != 0 || !strings.HasPrefix(out, "digraph pcie {") {
		t.Errorf("topo --format dot: exit %d, stderr %q, output starts %.40q", code, errOut, out)
	}
	// dot is topo's alone.
	if code, _, errOut := p2pcheck("--root", root, "pairs", "--format", "dot"); code != exitUsage {
		t.Errorf("pairs --format dot: exit %d (%s), want %d", code, errOut, exitUsage)
	}
	if code, _, _ := p2pcheck("--root", root, "topo", "--format", "svg"); code != exitUsage {
		t.Errorf("topo --format svg: exit %d, want %d", code, exitUsage)
	}
}

func TestPairLabels(t *testing.T) {
	root := machineRoot(t, "amd-epyc")
	for _, args := range [][]string{{"GPU0", "NIC0"}, {"gpu0", "nic0"}, {"0000:01:00.0", "mlx5_0"}} {
		code, out, errOut := p2pcheck(append([]string{"--root", root, "pair", "--format", "json"}, args...)...)
		if code != 0 || !strings.Contains(out, `"provider": "0000:01:00.0"`) || !strings.Contains(out, `"client": "0000:02:00.0"`) {
			t.Errorf("pair %v: exit %d, stderr %q\n%s", args, code, errOut, out)
		}
	}
	if code, _, _ := p2pcheck("--root", root, "pair", "GPU9", "NIC0"); code != exitUsage {
		t.Errorf("pair GPU9 NIC0: exit %d, want %d", code, exitUsage)
	}
}
