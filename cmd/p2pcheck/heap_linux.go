package main

import (
	"os"
	"runtime"
	"strings"

	"github.com/p2pkit/p2pkit/internal/hugepage"
)

// hugePagesFirst has the first startingHeap bytes of heap that p2pcheck fills backed
// by transparent huge pages where the kernel offers them only on request
// (/sys/kernel/mm/transparent_hugepage/enabled set to "madvise", Ubuntu's and
// Debian's default): p2pcheck fills that much in its first milliseconds, and
// faulting it in 4 KiB at a time was a fifth of `topo`'s CPU time on a 1,000-function
// node (3,400 page faults; 850 with this). The Go runtime asks for huge pages only
// for its own index, not for the heap.
//
// It allocates startingHeap bytes, which the runtime maps fresh, marks the whole
// huge pages inside them MADV_HUGEPAGE (madvise(2): advice only, the contents are
// untouched), and lets a collection free them: the runtime hands out the lowest
// free pages first, so what p2pcheck allocates next lands in the marked range and
// its first touch of each 2 MiB faults in one huge page. Nothing is marked where the
// range holds no whole huge page (64 KiB-page arm64, whose huge pages are 512 MiB),
// or where GODEBUG has disablethp=1, the runtime's own switch for keeping huge pages
// off the heap; with huge pages off ("never") the advice changes nothing. Where no
// huge page is free, the kernel may compact memory for one (transparent_hugepage/
// defrag) and otherwise falls back to 4 KiB pages: at most 16 such faults a run.
// Peak RSS grows by a few MiB (topo of that node: 22 to 27 MB).
func hugePagesFirst() {
	if strings.Contains(os.Getenv("GODEBUG"), "disablethp=1") {
		return
	}
	if _, _, ok := hugepage.Advise(make([]byte, startingHeap)); ok {
		runtime.GC()
	}
}
