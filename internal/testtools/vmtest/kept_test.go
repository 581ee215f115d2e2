package vmtest

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// keptDir holds the guest captures, one directory per <topology>-<kernel>.
const keptDir = "../../../testdata/vm"

// TestKeptCaptures runs the VM tier's checks offline, in the unit tier, on the
// captures kept under testdata/vm: the busybox view against the catalogue, the
// kernel's facts and oracle report, the snapshot through sysfs and pcie, and
// p2pcheck's pairs against the oracle. A change to sysfs, pcie or the catalogue
// that breaks on real-kernel trees fails here without booting anything.
func TestKeptCaptures(t *testing.T) {
	entries, err := os.ReadDir(keptDir)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skip("no captures kept yet (run the VM tier with P2PKIT_VM_UPDATE=1)")
	}
	if err != nil {
		t.Fatal(err)
	}
	cat := map[string]*Topology{}
	for _, topo := range Catalogue() {
		cat[topo.Name] = topo
	}
	runs := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		runs++
		t.Run(e.Name(), func(t *testing.T) { checkKept(t, cat, e.Name()) })
	}
	if runs == 0 {
		t.Skip("no captures kept yet (run the VM tier with P2PKIT_VM_UPDATE=1)")
	}
}

// checkKept runs the VM tier's checks on the capture kept in keptDir/dir,
// <catalogue entry>-<debian|oracle>.
func checkKept(t *testing.T, cat map[string]*Topology, dir string) {
	i := strings.LastIndex(dir, "-")
	topo, kname := cat[dir[:max(i, 0)]], dir[i+1:]
	if topo == nil || (kname != KernelDebian && kname != KernelOracle) {
		t.Fatalf("%s is not <catalogue entry>-<debian|oracle>: remove it or add the entry", dir)
	}
	k := Kernel{Name: kname, Oracle: kname == KernelOracle}
	read := func(name string) ([]byte, bool) {
		b, err := os.ReadFile(filepath.Join(keptDir, dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return b, true
	}
	// The capture must come from the entry as it is now.
	meta, _ := read("meta.txt")
	args := strings.Join(append([]string{"-append", strings.Join(topo.Cmdline(k), " ")},
		topo.QEMUArgs("$WORK", guestMemMiB, guestSMP)...), " ")
	if !strings.Contains(string(meta), args) {
		t.Errorf("meta.txt was captured with other QEMU arguments than the entry's now:\n%s\nwant\n%s\n"+
			"(rerun the tier with P2PKIT_VM_UPDATE=1)", meta, args)
	}
	b, ok := read("pci.txt")
	if !ok {
		t.Fatal("pci.txt missing")
	}
	dump, err := ParsePCIDump(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range DiffFuncs(topo.Want(), dump.Funcs) {
		t.Errorf("tree: %s", d)
	}
	checkFacts(t, topo, k, dump)
	checkKeptCaptures(t, topo, k, dump, read)
}

// checkKeptCaptures checks the oracle's report and what p2pcheck captured in
// the guest, each capture that was kept.
func checkKeptCaptures(t *testing.T, topo *Topology, k Kernel, dump View, read func(string) ([]byte, bool)) {
	var oracle *Oracle
	if k.Oracle {
		b, ok := read("oracle.txt")
		if !ok {
			t.Fatal("oracle.txt missing")
		}
		o, err := ParseOracle(b)
		if err != nil {
			t.Fatal(err)
		}
		checkOracleShape(t, topo, dump, o)
		oracle = &o
	}
	if b, ok := read("snapshot.tar.gz"); ok {
		checkSnapshot(t, topo, dump, b)
	}
	if b, ok := read("topo.json"); ok {
		checkTopo(t, topo, dump, b)
	}
	if b, ok := read("pairs.json"); ok && oracle != nil {
		checkPairs(t, withVFs(t, *oracle, dump), dump, b)
	}
	if b, ok := read("oracle-rerun.txt"); ok && topo.Fix && oracle != nil {
		rerun, err := ParseOracle(b)
		if err != nil {
			t.Fatal(err)
		}
		t.Run("fix", func(t *testing.T) { checkFix(t, topo, dump, *oracle, rerun, read) })
	}
	if topo.Persisted {
		t.Run("persisted", func(t *testing.T) { checkPersisted(t, topo, oracle, read) })
	}
	if topo.VirtHost != nil {
		t.Run("virt-host", func(t *testing.T) { checkVirtHost(t, topo, k, dump, oracle, read) })
	}
}
