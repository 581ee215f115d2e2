package main

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/p2pkit/p2pkit/hostfs"
)

// TestHugePagesFirstKeepsStartingHeap checks that hugePagesFirst's collection is not
// taken for the first one: growHeapFirst's sentinel outlives it and GOGC stays at
// the starting heap's, and GOMAXPROCS is what it was.
func TestHugePagesFirstKeepsStartingHeap(t *testing.T) {
	if _, set := os.LookupEnv("GOGC"); set {
		t.Skip("GOGC is set: growHeapFirst leaves it alone")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	procs := runtime.GOMAXPROCS(0)
	growHeapFirst()
	hugePagesFirst()
	if startSentinel.Value() == nil {
		t.Error("growHeapFirst's sentinel was collected by hugePagesFirst's collection")
	}
	if got := gogc(); got != 800 {
		t.Errorf("GOGC after hugePagesFirst = %d, want 800", got)
	}
	if got := runtime.GOMAXPROCS(0); got != procs {
		t.Errorf("GOMAXPROCS after hugePagesFirst = %d, want %d", got, procs)
	}
}

// TestHugePagesForTree checks that hugePagesForTree marks the heap for a tree of
// hugePageFunctions functions and not for one of fewer, once a process.
func TestHugePagesForTree(t *testing.T) {
	skipUnlessCollects(t)
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	tree := func(functions int) hostfs.Root {
		dir := t.TempDir()
		devices := filepath.Join(dir, "sys/bus/pci/devices")
		if err := os.MkdirAll(devices, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range functions {
			if err := os.WriteFile(filepath.Join(devices, strconv.Itoa(i)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		root, err := hostfs.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { root.Close() })
		return root
	}
	hugePagesOnce = sync.Once{}
	for _, tt := range []struct {
		functions int
		want      uint32 // forced collections
	}{
		{hugePageFunctions - 1, 0},
		{hugePageFunctions, 1},
		{hugePageFunctions, 0}, // once a process
	} {
		before := forcedCollections()
		hugePagesForTree(tree(tt.functions))
		if got := forcedCollections() - before; got != tt.want {
			t.Errorf("%d functions: %d forced collections, want %d", tt.functions, got, tt.want)
		}
	}
}

// TestHugePagesForArchive checks that hugePagesForArchive marks the heap for a file
// of hugePageArchiveBytes and not for a smaller one or a directory.
func TestHugePagesForArchive(t *testing.T) {
	skipUnlessCollects(t)
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	dir := t.TempDir()
	file := func(size int) string {
		p := filepath.Join(dir, strconv.Itoa(size))
		if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hugePagesOnce = sync.Once{}
	for _, tt := range []struct {
		path string
		want uint32 // forced collections
	}{
		{dir, 0},
		{file(hugePageArchiveBytes - 1), 0},
		{file(hugePageArchiveBytes), 1},
	} {
		before := forcedCollections()
		hugePagesForArchive(tt.path)
		if got := forcedCollections() - before; got != tt.want {
			t.Errorf("%s: %d forced collections, want %d", tt.path, got, tt.want)
		}
	}
}

// forcedCollections is the number of collections runtime.GC has run.
func forcedCollections() uint32 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.NumForcedGC
}

// skipUnlessCollects skips a test that counts hugePagesFirst's collection where it
// has none to run: 4 KiB pages only (a 64 KiB-page arm64's huge page does not fit in
// startingHeap), and huge pages not switched off for the Go heap.
func skipUnlessCollects(t *testing.T) {
	t.Helper()
	if os.Getpagesize() != 4096 || strings.Contains(os.Getenv("GODEBUG"), "disablethp=1") {
		t.Skip("hugePagesFirst marks nothing here (page size or GODEBUG=disablethp=1)")
	}
}
