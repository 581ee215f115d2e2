package nccl

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/node"
)

// cpuPath returns the "CPU/0-1 (n/bw/TYPE)" entry of the first GPU's path line:
// its path to the CPU of the other socket.
func cpuPath(t *testing.T, r *Report) string {
	t.Helper()
	for _, f := range strings.Split(r.Paths[0], ") ") {
		if strings.HasPrefix(f, "CPU/0-1 (") || strings.HasPrefix(f, "CPU/1 (") {
			return f + ")"
		}
	}
	t.Fatalf("no path to CPU 1 in %q", r.Paths[0])
	return ""
}

// TestVersionRules checks rules that changed between releases on topologies whose
// path lines show them: the AMD inter-socket bandwidth (ncclTopoGetInterCpuBw: in
// 2.16.2, not in 2.16.5 to 2.18, from 2.19: LOC_BW, so the GPU's own PCIe link,
// 48 GB/s, is the bottleneck), Sapphire Rapids' (SRP_QPI_BW from
// 2.26, Skylake's before), and the path line format (from 2.21 "GPU/0-60" and one
// decimal; before, "GPU/60" and six).
func TestVersionRules(t *testing.T) {
	for _, tt := range []struct {
		xml  string
		v    Version
		want string
	}{
		{"amd-epyc.xml", Version{2, 28, 9}, "CPU/0-1 (2/16.0/SYS)"},
		{"amd-epyc.xml", Version{2, 19, 3}, "CPU/1 (2/16.000000/SYS)"},
		{"amd-epyc.xml", Version{2, 18, 6}, "CPU/1 (2/48.000000/SYS)"},
		{"amd-epyc.xml", Version{2, 16, 5}, "CPU/1 (2/48.000000/SYS)"},
		{"amd-epyc.xml", Version{2, 16, 2}, "CPU/1 (2/16.000000/SYS)"},
		{"dgx-h100.xml", Version{2, 28, 9}, "CPU/0-1 (3/22.0/SYS)"},
		{"dgx-h100.xml", Version{2, 25, 1}, "CPU/0-1 (3/10.0/SYS)"},
	} {
		t.Run(tt.xml+"-"+tt.v.String(), func(t *testing.T) {
			r, err := Predict(Input{Topology: readXML(t, filepath.Join(testdata, "golden", tt.xml)), Version: tt.v})
			if err != nil {
				t.Fatal(err)
			}
			if got := cpuPath(t, r); got != tt.want {
				t.Errorf("path to the other socket %s; want %s", got, tt.want)
			}
		})
	}
}

// TestUnknownNVLink is #24's point 4: on the two-H200 VM seen without NVML, where
// NCCL used NVLink P2P, the prediction says in the verdict itself that it rests on
// NVLink being unknown, in text and JSON.
func TestUnknownNVLink(t *testing.T) {
	n := testnode.Snapshot(t, "../testdata/h200-2gpu-vm/snapshot.tar.gz", node.Options{NoNames: true, NoGPU: true})
	in, _ := FromNode(n, eth0).Input(Settings{}, DefaultVersion, "test")
	r, err := Predict(in)
	if err != nil {
		t.Fatal(err)
	}
	want := "P2P/CUMEM if NVLink between the GPUs (unknown: NVML not asked), else SHM/direct/direct"
	for _, p := range r.GPUPairs {
		if p.Via != want || p.Transport != "unknown" {
			t.Errorf("GPU%d->GPU%d: %s via %s; want unknown via %s", p.From, p.To, p.Transport, p.Via, want)
		}
		if diff := cmp.Diff(&Outcome{Transport: "SHM", Via: "SHM/direct/direct"}, p.Otherwise); diff != "" {
			t.Errorf("otherwise (-want +got):\n%s", diff)
		}
	}
	if !strings.Contains(r.Text(), "via "+want) {
		t.Errorf("the text does not give the conditional verdict:\n%s", r.Text())
	}
}

// TestWriteJSON checks that the streamed JSON is json.MarshalIndent's.
func TestWriteJSON(t *testing.T) {
	for _, x := range []string{"dgx-h100.xml", "amd-epyc.xml"} {
		r, err := Predict(Input{Topology: readXML(t, filepath.Join(testdata, "golden", x))})
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := r.WriteJSON(&got); err != nil {
			t.Fatal(err)
		}
		want, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want)+"\n", got.String()); diff != "" {
			t.Errorf("%s: (-MarshalIndent +WriteJSON):\n%s", x, diff)
		}
	}
}
