package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/internal/hugepage"
)

// hugePageFunctions is the number of PCI functions from which hugePagesFirst's
// collection pays for itself. It costs 3 ms of CPU on the 16-CPU H200 host, a fifth
// of `topo` on a node of 68 functions, and saves none there, where a page fault
// costs under a microsecond; on the 2-core PVM guest, where one costs 11 µs, it
// saves 30 ms of `topo` on the 1,028-function tree.
const hugePageFunctions = 256

// hugePageArchiveBytes is the size of snapshot from which hugePagesFirst pays for
// itself: loading one fills more heap than reading the tree did, about 30 KB a
// function, from about 1.3 KB a function of archive (1.39 MB for 1,028 functions).
const hugePageArchiveBytes = 256 << 10

var hugePagesOnce sync.Once

// hugePagesForTree calls hugePagesFirst, once a process, before the tree fsys is
// read, when it holds at least hugePageFunctions functions (sys/bus/pci/devices).
func hugePagesForTree(fsys hostfs.Root) {
	if names, err := fsys.Names("sys/bus/pci/devices"); err == nil && len(names) >= hugePageFunctions {
		hugePagesOnce.Do(hugePagesFirst)
	}
}

// hugePagesForArchive calls hugePagesFirst, once a process, before the snapshot at
// path is loaded, when it is a file of at least hugePageArchiveBytes.
func hugePagesForArchive(path string) {
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Size() >= hugePageArchiveBytes {
		hugePagesOnce.Do(hugePagesFirst)
	}
}

// hugePagesFirst has the next startingHeap bytes of heap that p2pcheck fills backed
// by transparent huge pages where the kernel offers them only on request
// (/sys/kernel/mm/transparent_hugepage/enabled set to "madvise", Ubuntu's and
// Debian's default): reading a tree of a thousand functions fills that much, and
// faulting it in 4 KiB at a time was a fifth of `topo`'s CPU time on the 2-core PVM
// guest (3,400 page faults; 900 with this). The Go runtime asks for huge pages only
// for its own index, not for the heap.
//
// It allocates startingHeap bytes, which the runtime maps fresh, marks the whole
// huge pages inside them MADV_HUGEPAGE (madvise(2): advice only, the contents are
// untouched), and lets a collection free them: the runtime hands out the lowest
// free pages first, so what p2pcheck allocates next lands in the marked range and
// its first touch of each 2 MiB faults in one huge page. That collection is the only
// one: none starts while the range is allocated. It runs on one P, so that no mark
// worker is started for the others, and keeps growHeapFirst's sentinel alive: the
// starting heap still lasts until the runtime's own first collection. Nothing is
// marked where the range holds no whole huge page (64 KiB-page arm64, whose huge
// pages are 512 MiB), or where GODEBUG has disablethp=1, the runtime's own switch for
// keeping huge pages off the heap; with huge pages off ("never") the advice changes
// nothing. Where no huge page is free, the kernel may compact memory for one
// (transparent_hugepage/defrag) and otherwise falls back to 4 KiB pages: at most 16
// such faults a run. Peak RSS grows by a few MiB (topo of that tree: 22 to 27 MB).
func hugePagesFirst() {
	if strings.Contains(os.Getenv("GODEBUG"), "disablethp=1") {
		return
	}
	keep := startSentinel.Value()
	percent := debug.SetGCPercent(-1) // allocating startingHeap would start a collection of its own
	if _, _, ok := hugepage.Advise(make([]byte, startingHeap)); ok {
		procs := runtime.GOMAXPROCS(1)
		runtime.GC()
		if _, set := os.LookupEnv("GOMAXPROCS"); set {
			runtime.GOMAXPROCS(procs)
		} else {
			runtime.SetDefaultGOMAXPROCS() // and let the runtime follow CPU limits again
		}
	}
	debug.SetGCPercent(percent)
	runtime.KeepAlive(keep)
}
