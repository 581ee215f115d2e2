package render

import (
	"io"
	"testing"

	"github.com/p2pkit/p2pkit/internal/fixture"
	"github.com/p2pkit/p2pkit/internal/node"
	"github.com/p2pkit/p2pkit/sysfs"
)

// BenchmarkTopoText renders the tree of the 1,028-function synthetic machine, the
// last step of `p2pcheck topo` (make bench-topo times the whole process).
func BenchmarkTopoText(b *testing.B) {
	dir := b.TempDir()
	if err := fixture.Large(960).NoDeviceNodes().Write(dir); err != nil {
		b.Fatal(err)
	}
	fsys, err := sysfs.NewFS(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer fsys.Close()
	n, err := node.Load(fsys, node.Options{NoPlatform: true, NoNames: true})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := TopoText(io.Discard, n.Topology, Style{}); err != nil {
			b.Fatal(err)
		}
	}
}
