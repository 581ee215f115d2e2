package render

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
)

// BenchmarkTopoText renders the tree of the 1,028-function synthetic machine, the
// last step of `p2pcheck topo` (make bench-topo times the whole process).
func BenchmarkTopoText(b *testing.B) {
	n := testnode.Machine(b, fixture.Large(960), node.Options{NoPlatform: true, NoNames: true})
	b.ReportAllocs()
	for b.Loop() {
		if err := TopoText(io.Discard, n.Topology, Style{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTopoTextEveryFunction checks that text topo prints every function: below a
// missing bridge, in a loop, naming itself as parent, and with control bytes in
// its driver's name, which are escaped.
func TestTopoTextEveryFunction(t *testing.T) {
	recs := []pcie.Record{
		{Address: testsupport.Addr(t, "0000:00:00.0"), Path: "pci0000:00/0000:00:00.0", Class: 0x060000},
		// 00:01.0 was not read: its children hang in the air.
		{Address: testsupport.Addr(t, "0000:01:00.0"), Path: "pci0000:00/0000:00:01.0/0000:01:00.0", Class: 0x060400},
		{Address: testsupport.Addr(t, "0000:02:00.0"), Path: "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0", Class: 0x030200,
			Vendor: 0x10de, Device: 0x2330, Driver: "nv\x1b]0;owned\x07idia"},
		// Two bridges naming each other as parent.
		{Address: testsupport.Addr(t, "0000:05:00.0"), Path: "pci0000:00/0000:06:00.0/0000:05:00.0", Class: 0x060400},
		{Address: testsupport.Addr(t, "0000:06:00.0"), Path: "pci0000:00/0000:05:00.0/0000:06:00.0", Class: 0x060400},
		// A path without a host bridge.
		{Address: testsupport.Addr(t, "0000:07:00.0"), Path: "0000:07:00.0", Class: 0x020000},
	}
	top := pcie.NewTopology(recs)
	var b strings.Builder
	if err := TopoText(&b, top, Style{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, r := range recs {
		if strings.Count(out, r.Address.String()+" [") != 1 {
			t.Errorf("%s printed %d times, want once:\n%s", r.Address, strings.Count(out, r.Address.String()+" ["), out)
		}
	}
	for _, want := range []string{"unattached:", "(bridge 0000:00:01.0 of its sysfs path is missing)", "closes a loop", "no host bridge in sysfs path",
		`driver nv\x1b]0;owned\x07idia`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.ContainsAny(out, "\x1b\x07") {
		t.Errorf("control bytes reached the output:\n%q", out)
	}
}

// TestTopoTextDeepLinear: a chain of bridges far deeper than any machine's, a GPU
// below each, as a crafted snapshot builds from short sysfs paths. Every line's
// length is bounded (the levels past maxTreeLevels are counted, not drawn), so the
// text is linear in the functions; drawn in full it would be quadratic in the depth.
func TestTopoTextDeepLinear(t *testing.T) {
	const n = 2000
	var recs []pcie.Record
	parent := "pci0000:00"
	for i := range n {
		b := fmt.Sprintf("%04x:%02x:00.0", i>>8, i&0xff)
		recs = append(recs,
			pcie.Record{Address: testsupport.Addr(t, b), Path: parent + "/" + b, Class: 0x060400},
			pcie.Record{Address: testsupport.Addr(t, b[:8]+"01.0"), Path: parent + "/" + b + "/" + b[:8] + "01.0", Class: 0x030200, Vendor: 0x10de, Device: 0x2335})
		parent = "pci0000:00/" + b
	}
	top := pcie.NewTopology(recs)
	if d := top.Devices[len(top.Devices)-1].Depth(); d != n {
		t.Fatalf("deepest function %d bridges deep, want %d", d, n)
	}
	var b strings.Builder
	if err := TopoText(&b, top, Style{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	longest := 0
	for l := range strings.Lines(out) {
		longest = max(longest, utf8.RuneCountInString(l))
	}
	// A line holds the count, maxTreeLevels levels of 3 columns, the branch and the
	// function's title or facts.
	if limit := 8 + 3*maxTreeLevels + 3 + 120; longest > limit {
		t.Errorf("longest line %d characters, want at most %d", longest, limit)
	}
	if limit := 2 * n * 260; len(out) > limit {
		t.Errorf("%d bytes for %d functions, want at most %d", len(out), 2*n, limit)
	}
	for _, want := range []string{"[+1984] ", fmt.Sprintf("%04x:%02x:01.0", (n-1)>>8, (n-1)&0xff)} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out, "unattached") {
		t.Errorf("a function of the chain printed as unattached")
	}
}
