package main

import (
	"io"
	"os"
	"testing"

	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
)

// BenchmarkTopoLarge runs the whole of `p2pcheck --root DIR topo` in one process
// on the 1,028-function synthetic machine (the tree topobench times against
// lspci), so that a CPU profile (-cpuprofile) splits its time among reading,
// the model, names and render; system-call time counts to the Go stack that made
// the call. Process start and the first heap's page faults are not in it:
// topobench times those. P2PKIT_BENCH_ROOT names an existing tree instead.
func BenchmarkTopoLarge(b *testing.B) {
	root := os.Getenv("P2PKIT_BENCH_ROOT")
	if root == "" {
		root = b.TempDir()
		if err := fixture.Large(960).Write(root); err != nil {
			b.Fatal(err)
		}
	}
	args := []string{"--root", root, "--no-color", "topo"}
	if code := run(args, io.Discard, os.Stderr); code != exitOK {
		b.Fatalf("p2pcheck %v: exit %d", args, code)
	}
	for b.Loop() {
		run(args, io.Discard, io.Discard)
	}
}
