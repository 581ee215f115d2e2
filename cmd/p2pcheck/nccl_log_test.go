package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/nccl"
)

// TestNCCLLogCommand runs 'p2pcheck nccl --log' on the H200's two-rank logs, alone
// and with NCCL's own dump as --topo-file, in text and JSON (validated against
// schema/nccl-log.v1.json), and from standard input.
func TestNCCLLogCommand(t *testing.T) {
	validate := testsupport.Schema(t, "../../schema/nccl-log.v1.json")
	logs := []string{"--log", filepath.Join(h200Offline, "nccl-2rank-0.log"), "--log", filepath.Join(h200Offline, "nccl-2rank-1.log")}
	for _, extra := range [][]string{nil, {"--topo-file", filepath.Join(h200Offline, "nccl-topo-2rank.xml")}} {
		args := append(append([]string{"nccl", "--format", "json"}, logs...), extra...)
		code, out, stderr := p2pcheck(args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		if err := validate([]byte(out)); err != nil {
			t.Errorf("%v: %v", args, err)
		}
		var r nccl.LogReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Channels) != 4 || len(r.Disagree) != 0 || r.NotUndCount != 0 {
			t.Errorf("%v: %d channel groups, disagreements %+v, %d not understood", args, len(r.Channels), r.Disagree, r.NotUndCount)
		}
		for _, g := range r.Channels {
			// --topo-file is rank 0's host (NCCL_TOPO_DUMP_FILE is rank 0's):
			// what rank 1's host printed is not compared.
			printer := g.From
			if g.Side == "receive" {
				printer = g.To
			}
			want := "yes"
			if extra != nil && printer == 1 {
				want = "not compared"
			}
			if g.Agrees != want {
				t.Errorf("%v: %d -> %d %s: predicted %q", args, g.From, g.To, g.Side, g.Predicted)
			}
		}
	}
	code, out, _ := p2pcheck(append([]string{"nccl"}, logs...)...)
	if code != exitOK || !strings.Contains(out, "ranks 0 and 1 are on different hosts") || !strings.Contains(out, "disagreements with the prediction:\n  none") {
		t.Errorf("text: exit %d\n%s", code, out)
	}
	old := stdin
	stdin = strings.NewReader(readFixture(t, "nccl-2rank-0.log"))
	defer func() { stdin = old }()
	if code, out, stderr := p2pcheck("nccl", "--log", "-"); code != exitOK || !strings.Contains(out, "[send] via NET/Socket/0") {
		t.Errorf("--log -: exit %d: %s\n%s", code, stderr, out)
	}
	for _, args := range [][]string{
		{"nccl", "--log", "-", "--log", "-"},
		{"nccl", "--log", "x", "--topo-xml", "y"},
		{"nccl", "--net-plugin", "IB"},
	} {
		if code, _, _ := p2pcheck(args...); code != exitUsage {
			t.Errorf("%v: exit %d; want %d", args, code, exitUsage)
		}
	}
	if code, _, _ := p2pcheck("nccl", "--log", "/nonexistent.log"); code != exitNoEval {
		t.Errorf("a missing log: exit %d; want %d", code, exitNoEval)
	}
	if code, _, _ := p2pcheck("nccl", "--log", "/dev/null", "--topo-file", "/dev/zero"); code != exitNoEval {
		t.Errorf("a device as --topo-file: exit %d; want %d", code, exitNoEval)
	}
}
