package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"weak"
)

// startingHeap is the heap p2pcheck grows to before its first collection.
const startingHeap = 32 << 20

// growHeapFirst lets the heap reach about startingHeap bytes before the collector first
// runs, then gives pacing back to the default GOGC of 100. p2pcheck lives for tens of
// milliseconds and keeps most of what it allocates (the records, the tree) until it
// exits, so the collections the runtime would start at 4 and 8 MiB find little to free
// and take a CPU from the goroutines reading sysfs. The Go compiler starts the same
// way (cmd/compile/internal/base AdjustStartingHeap). A GOGC the user set is left
// alone.
func growHeapFirst() {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	// The runtime's first goal is 4 MiB times GOGC/100 (runtime/mgcpacer.go
	// heapMinimum).
	old := debug.SetGCPercent(startingHeap / (4 << 20) * 100)
	sentinel := new([64]byte)
	runtime.AddCleanup(sentinel, func(percent int) { debug.SetGCPercent(percent) }, old)
	startSentinel = weak.Make(sentinel)
}

// startSentinel is growHeapFirst's sentinel while it lives, so that a collection
// p2pcheck forces (hugePagesFirst's) is not taken for the first one.
var startSentinel weak.Pointer[[64]byte]
