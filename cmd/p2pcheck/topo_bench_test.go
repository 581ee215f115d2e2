package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
)

// benchRoot is P2PKIT_BENCH_ROOT, an existing tree, or else the 1,028-function
// synthetic machine (the tree topobench times against lspci) written for b.
func benchRoot(b *testing.B) string {
	if root := os.Getenv("P2PKIT_BENCH_ROOT"); root != "" {
		return root
	}
	root := b.TempDir()
	if err := fixture.Large(960).Write(root); err != nil {
		b.Fatal(err)
	}
	return root
}

// benchRun runs p2pcheck with args in b's loop, each run after clean, and fails b
// on a run that does not exit 0.
func benchRun(b *testing.B, clean func(), args ...string) {
	for b.Loop() {
		clean()
		if code := run(args, io.Discard, os.Stderr); code != exitOK {
			b.Fatalf("p2pcheck %v: exit %d", args, code)
		}
	}
}

// BenchmarkTopoLarge runs the whole of `p2pcheck --root DIR topo` in one process
// on benchRoot's machine, so that a CPU profile (-cpuprofile) splits its time
// among reading, the model, names and render; system-call time counts to the Go
// stack that made the call. Process start and the first heap's page faults are
// not in it: topobench times those.
func BenchmarkTopoLarge(b *testing.B) {
	benchRun(b, func() {}, "--root", benchRoot(b), "--no-color", "topo")
}

// BenchmarkSnapshotLarge is BenchmarkTopoLarge for `p2pcheck snapshot -o FILE`:
// the walk, the reads, tar and gzip.
func BenchmarkSnapshotLarge(b *testing.B) {
	out := filepath.Join(b.TempDir(), "snap.tar.gz")
	benchRun(b, func() { os.Remove(out) }, "--root", benchRoot(b), "snapshot", "-o", out)
}
