package render

import (
	"io"
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/internal/fixture"
	"github.com/p2pkit/p2pkit/internal/testsupport"
	"github.com/p2pkit/p2pkit/internal/testsupport/testnode"
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
