package procfs

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/hostfs"
)

const limitsFile = "Limit                     Soft Limit           Hard Limit           Units     \n" +
	"Max cpu time              unlimited            unlimited            seconds   \n" +
	"Max locked memory         8388608              unlimited            bytes     \n" +
	"Max address space         unlimited            unlimited            bytes     \n"

func TestProcess(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, []entry{
		file("proc/777/status", "Name:\tpython\nUid:\t1000\t1000\t1000\t1001\nGid:\t1000\t1000\t1000\t1002\nGroups:\t4 27 x\nCapEff:\t0000000000004000\n"),
		file("proc/777/comm", "python\n"),
		file("proc/777/limits", limitsFile),
		file("proc/777/environ", "HOME=/home/alice\x00NCCL_P2P_LEVEL=PIX\x00NCCL_P2P_LEVEL=SYS\x00junk\x00\x00"),
		file("proc/888/status", "Uid:\t0\t0\t0\t0\n"),
	})
	fsys, err := NewFS(root)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	got, err := fsys.Process(777)
	if err != nil {
		t.Fatal(err)
	}
	want := ProcessFacts{PID: 777, Comm: "python", EUID: 1000, FSUID: 1001, FSGID: 1002, Groups: []uint32{4, 27},
		CapEff: 1 << CapIPCLock, CapEffKnown: true,
		MemlockSoft: 8 << 20, MemlockHard: math.MaxUint64, MemlockKnown: true,
		Env: map[string]string{"HOME": "/home/alice", "NCCL_P2P_LEVEL": "PIX", "junk": ""}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Process(777) (-want +got):\n%s", diff)
	}
	wantCred := hostfs.Cred{UID: 1001, GID: 1002, Groups: []uint32{4, 27}}
	if c, ok := got.Cred(); !ok || !cmp.Equal(c, wantCred) {
		t.Errorf("Cred() = %+v, %v; want %+v", c, ok, wantCred)
	}
	// No limits, no environ: the limit is unknown (an error), the environment says why.
	got, err = fsys.Process(888)
	if err == nil || got.MemlockKnown || got.Env != nil || got.EnvErr == nil || got.EUID != 0 {
		t.Errorf("Process(888) = %+v, %v; want unknown limit and environment", got, err)
	}
	if _, err := fsys.Process(999); err == nil {
		t.Error("Process(999) of a missing process: no error")
	}
	if _, err := fsys.Process(-1); err == nil {
		t.Error("Process(-1): no error")
	}
}

func FuzzProcParsers(f *testing.F) {
	for _, s := range []string{limitsFile, "Uid:\t1\t2\t3\t4\nCapEff:\tffffffffffffffff\n", "A=b\x00c\x00=d\x00", "Max locked memory x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		parseProcStatus(b)
		parseMemlockLimit(b)
		for k := range parseEnviron(b) {
			if k == "" {
				t.Error("empty name")
			}
		}
	})
}
