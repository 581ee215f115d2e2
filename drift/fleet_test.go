package drift

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/snapshot"
)

// snapSource is a fleet of snapshots held as bytes, read one at a time as
// p2pcheck diff --fleet reads files. depth counts the Summaries alive.
type snapSource struct {
	snaps        [][]byte
	names        []string
	loads, depth int
	maxDepth     int
}

func (s *snapSource) Len() int          { return len(s.snaps) }
func (s *snapSource) Name(i int) string { return s.names[i] }

func (s *snapSource) Load(i int, f func(*Summary) error) error {
	root, err := snapshot.Read(bytes.NewReader(s.snaps[i]))
	if err != nil {
		return err
	}
	n, err := node.Load(root, node.Options{NoNames: true})
	root.Close()
	if err != nil {
		return err
	}
	s.loads++
	s.depth++
	s.maxDepth = max(s.maxDepth, s.depth)
	defer func() { s.depth-- }()
	return f(Summarize(n))
}

// TestFleetOneOddNode generates 100 snapshots of one node design, each with its
// own host name and GPU UUIDs, one of them (node042) with a GPU trained at Gen4
// x8: the fleet has two signatures, the majority of 99 and node042, whose
// differences are that link and what it changes, nothing else.
func TestFleetOneOddNode(t *testing.T) {
	src := &snapSource{}
	for i := range 100 {
		s := baseSpec()
		s.hostname, s.uuid, s.nvlinks = fmt.Sprintf("node%03d", i), fmt.Sprintf("GPU-%04x-", i*7919), 18
		if i == 42 {
			s.gpu1Trained = pcie.Link{Speed: 4, Width: 8}
		}
		var b bytes.Buffer
		if err := s.machine().WriteSnapshot(&b); err != nil {
			t.Fatal(err)
		}
		src.snaps = append(src.snaps, b.Bytes())
		src.names = append(src.names, fmt.Sprintf("node%03d", i))
	}
	src.snaps = append(src.snaps, []byte("not a snapshot"))
	src.names = append(src.names, "broken")
	res := Fleet(src)
	if len(res.Groups) != 2 || !res.Majority {
		t.Fatalf("%d groups (majority %v), want 2 with a majority", len(res.Groups), res.Majority)
	}
	if n := len(res.Groups[0].Nodes); n != 99 {
		t.Errorf("majority of %d nodes, want 99", n)
	}
	odd := res.Groups[1]
	if gocmp.Diff([]int{42}, odd.Nodes) != "" || odd.Result == nil {
		t.Fatalf("odd group %v (result %v), want node042", odd.Nodes, odd.Result)
	}
	want := []string{
		"warn link changed GPU1 link: Gen5 x16 -> Gen4 x8 (downgraded) (new downgrade)",
		"verdict checks changed check pcie_link: pass -> warn",
	}
	if diff := gocmp.Diff(want, briefs(*odd.Result)); diff != "" {
		t.Errorf("node042's differences (-want +got):\n%s", diff)
	}
	if len(res.Unreadable) != 1 || res.Unreadable[0].Node != 100 {
		t.Errorf("unreadable %+v, want the broken one", res.Unreadable)
	}
	// Every snapshot read once, then the majority's first and node042 again.
	if src.loads != 100+2 || src.maxDepth != 2 {
		t.Errorf("%d loads, at most %d at once; want 102 and 2", src.loads, src.maxDepth)
	}
}

// countSource is a fleet of n machines of two designs, summarized once each:
// Load hands the same Summaries out again and counts how many are in use.
type countSource struct {
	n            int
	odd          map[int]bool
	common, rare *Summary
	loads, depth int
	maxDepth     int
}

func (s *countSource) Len() int          { return s.n }
func (s *countSource) Name(i int) string { return fmt.Sprintf("node%05d", i) }

func (s *countSource) Load(i int, f func(*Summary) error) error {
	s.loads++
	s.depth++
	s.maxDepth = max(s.maxDepth, s.depth)
	defer func() { s.depth-- }()
	if s.odd[i] {
		return f(s.rare)
	}
	return f(s.common)
}

// TestFleetMemoryBound counts what a fleet of 10,000 machines of a thousand
// functions each (fixture.Large: 1,028 functions) costs: at most two Summaries
// are in use at any time, each machine is read once to group it and only a
// group's first machine again, and what the result keeps grows by a few bytes
// per machine (its index in its group), not by its Summary.
func TestFleetMemoryBound(t *testing.T) {
	n := load(t, fixture.Large(960))
	if len(n.Topology.Devices) < 1000 {
		t.Fatalf("the large machine has %d functions", len(n.Topology.Devices))
	}
	common := Summarize(n)
	gpu := n.Topology.GPUs()[3]
	gpu.Config.Express.LinkStat.Width = 8 // one GPU trained on 8 lanes
	rare := Summarize(n)
	const machines = 10_000
	src := &countSource{n: machines, odd: map[int]bool{4711: true, 9000: true}, common: common, rare: rare}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res := Fleet(src)
	runtime.GC()
	runtime.ReadMemStats(&after)
	kept := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	runtime.KeepAlive(res)

	if len(res.Groups) != 2 || gocmp.Diff([]int{4711, 9000}, res.Groups[1].Nodes) != "" {
		t.Fatalf("groups: %d, odd %v", len(res.Groups), res.Groups[len(res.Groups)-1].Nodes)
	}
	if src.loads != machines+2 || src.maxDepth > 2 {
		t.Errorf("%d loads with at most %d Summaries in use; want %d and 2", src.loads, src.maxDepth, machines+2)
	}
	// 10,000 ints in the groups, the odd group's few changes, slack for the
	// runtime: far below one Summary per machine.
	if limit := int64(machines*16 + 256<<10); kept > limit {
		t.Errorf("the result keeps %d bytes for %d machines, want at most %d", kept, machines, limit)
	}
	runtime.GC()
	runtime.ReadMemStats(&before)
	one := Summarize(n)
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(one)
	t.Logf("the result of %d machines keeps %d bytes; one Summary of %d functions is %d bytes",
		machines, kept, len(n.Topology.Devices), int64(after.HeapAlloc)-int64(before.HeapAlloc))
}
