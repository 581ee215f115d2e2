package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/nccl"
)

// h200Offline is #24's device run on the 1×H200 VM (scripts/nccl-device-offline.sh).
const h200Offline = "../../testdata/nccl/h200-1gpu-offline"

func readFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h200Offline, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestH200OfflineEqualsLive is #24's first acceptance point: 'p2pcheck nccl' on the
// snapshot taken on the 1×H200 machine gives, byte for byte, what it printed live
// there (text and JSON) but for the line saying where the NCCL version came from,
// and its --topo-xml is NCCL's own NCCL_TOPO_DUMP_FILE but for host_hash.
func TestH200OfflineEqualsLive(t *testing.T) {
	snap := filepath.Join(h200Offline, "snapshot.tar.gz")
	for _, tt := range []struct{ live, format string }{{"p2pcheck-nccl.txt", "text"}, {"p2pcheck-nccl.json", "json"}} {
		code, out, stderr := p2pcheck("--snapshot", snap, "nccl", "--format", tt.format)
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		live := readFixture(t, tt.live)
		if diff := cmp.Diff(withoutVersionSource(live), withoutVersionSource(out)); diff != "" {
			t.Errorf("%s (-live +offline):\n%s", tt.format, diff)
		}
		if lines := strings.Count(live, "\n"); lines != strings.Count(out, "\n") || lines < 10 {
			t.Errorf("%s: %d lines live, %d offline", tt.format, lines, strings.Count(out, "\n"))
		}
	}
	code, out, stderr := p2pcheck("--snapshot", snap, "nccl", "--topo-xml", "-")
	if code != exitOK {
		t.Fatalf("--topo-xml: exit %d: %s", code, stderr)
	}
	if diff := cmp.Diff(readFixture(t, "p2pcheck-topo.xml"), out); diff != "" {
		t.Errorf("--topo-xml (-live +offline):\n%s", diff)
	}
	var dump []string
	for _, l := range strings.Split(readFixture(t, "nccl-topo.xml"), "\n") {
		if i := strings.Index(l, ` host_hash="`); i >= 0 {
			j := strings.Index(l[i+len(` host_hash="`):], `"`)
			l = l[:i] + l[i+len(` host_hash="`)+j+1:]
		}
		dump = append(dump, l)
	}
	if diff := cmp.Diff(dump, strings.Split(out, "\n")); diff != "" {
		t.Errorf("--topo-xml (-NCCL_TOPO_DUMP_FILE without host_hash +p2pcheck):\n%s", diff)
	}
}

// decisions are what a prediction decides, without its reasons and provenance.
type decisions struct {
	Paths []string
	Nets  []string
	Pairs []nccl.Outcome
	GDR   []nccl.Outcome
	Copy  string
}

func decided(t *testing.T, out string) decisions {
	t.Helper()
	var r nccl.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	d := decisions{Paths: r.Paths, Copy: r.GDRCopy.Use}
	for _, n := range r.Nets {
		d.Nets = append(d.Nets, fmt.Sprintf("NET/%d %s %s %q gdr %s", n.Dev, n.Name, n.Plugin, n.BusID, n.GDR))
	}
	for _, p := range r.GPUPairs {
		d.Pairs = append(d.Pairs, nccl.Outcome{Transport: p.Transport, Via: p.Via})
	}
	for _, g := range r.GPUNets {
		d.GDR = append(d.GDR, nccl.Outcome{Recv: g.Recv, Send: g.Send, Via: g.Path.String()})
	}
	return d
}

// TestH200TopoFileGivesLive is #24's second acceptance point: NCCL's own
// topology dump from the 1×H200 machine, taken as the machine with the plugin
// NCCL named ("Using network Socket"), gives the live prediction: the same path
// lines, network devices, GPUDirect RDMA and GDRCopy decisions.
func TestH200TopoFileGivesLive(t *testing.T) {
	for _, xml := range []string{"nccl-topo.xml", "nccl-topo-2rank.xml"} {
		code, out, stderr := p2pcheck("nccl", "--topo-file", filepath.Join(h200Offline, xml), "--net-plugin", "Socket", "--format", "json")
		if code != exitOK {
			t.Fatalf("%s: exit %d: %s", xml, code, stderr)
		}
		if diff := cmp.Diff(decided(t, readFixture(t, "p2pcheck-nccl.json")), decided(t, out)); diff != "" {
			t.Errorf("%s: decisions (-live +topo-file):\n%s", xml, diff)
		}
	}
}
