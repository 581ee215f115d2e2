package hugepage

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestAdvise checks in /proc/self/smaps that the range Advise marks in 32 MiB
// is one the kernel keeps the advice for (VmFlags "hg", fs/proc/task_mmu.c
// show_smap_vma_flags for VM_HUGEPAGE), and that it lies inside what was allocated.
func TestAdvise(t *testing.T) {
	const size = 32 << 20
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil {
		t.Skipf("this kernel has no transparent huge pages: %v", err)
	}
	beg, end, ok := Advise(make([]byte, size))
	if !ok {
		t.Skipf("no whole huge page fits in %d bytes with %d-byte pages", size, os.Getpagesize())
	}
	if end-beg < size/2 {
		t.Errorf("marked %d bytes of %d", end-beg, size)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps to look at: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); n == 2 {
			in = lo <= beg && beg < hi
			if in && hi < end {
				t.Errorf("the mapping %x-%x holding the range ends before it does (%x)", lo, hi, end)
			}
			continue
		}
		if flags, ok := strings.CutPrefix(line, "VmFlags:"); ok && in {
			if !strings.Contains(" "+flags+" ", " hg ") {
				t.Errorf("the range at %x is not marked for huge pages: VmFlags%s", beg, flags)
			}
			return
		}
	}
	t.Fatalf("no mapping in /proc/self/smaps holds %x (%v)", beg, sc.Err())
}
