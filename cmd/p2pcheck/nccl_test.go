package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/nccl"
)

// TestNCCLCommand runs 'p2pcheck nccl' on the captured two-H200 VM: the JSON
// decodes, --assume reaches the prediction, --topo-xml writes what NCCL reads, and
// bad arguments are usage errors.
func TestNCCLCommand(t *testing.T) {
	snap := filepath.Join("..", "..", "testdata", "h200-2gpu-vm", "snapshot.tar.gz")
	code, out, stderr := p2pcheck("nccl", "--snapshot", snap, "--nccl-version", "2.22.3", "--assume", "NCCL_P2P_LEVEL=PHB", "--format", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r nccl.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.NCCLVersion != "2.22.3" || r.VersionSource != "--nccl-version" {
		t.Errorf("version %s from %s", r.NCCLVersion, r.VersionSource)
	}
	if len(r.GPUPairs) != 2 || r.GPUPairs[0].Transport != "P2P" {
		t.Errorf("pairs %+v; want P2P over PCIe with NCCL_P2P_LEVEL=PHB", r.GPUPairs)
	}
	if len(r.Settings) != 1 || r.Settings[0].Source != "--assume" {
		t.Errorf("settings %+v", r.Settings)
	}

	xml := filepath.Join(t.TempDir(), "topo.xml")
	if code, _, stderr := p2pcheck("nccl", "--snapshot", snap, "--topo-xml", xml); code != exitOK {
		t.Fatalf("--topo-xml: exit %d: %s", code, stderr)
	}
	f, err := os.Open(xml)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	root, err := nccl.ParseXML(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nccl.NewSystem(root); err != nil {
		t.Errorf("the XML does not load: %v", err)
	}

	code, out, _ = p2pcheck("nccl", "--snapshot", snap)
	if code != exitOK || !strings.Contains(out, "GPU0 -> GPU1") {
		t.Errorf("text: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{
		{"nccl", "--snapshot", snap, "--assume", "P2P_LEVEL=PHB"},
		{"nccl", "--snapshot", snap, "--nccl-version", "two"},
	} {
		if code, _, _ := p2pcheck(args...); code != exitUsage {
			t.Errorf("%v: exit %d; want %d", args, code, exitUsage)
		}
	}
}
