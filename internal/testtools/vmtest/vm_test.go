//go:build vmtest

package vmtest

import (
	"bytes"
	"cmp"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
)

// guestTimeout bounds one boot. TCG on two shared cores boots a guest in 5-40 s;
// the limit leaves room for a loaded CI runner.
const guestTimeout = 4 * time.Minute

// env is what the tier needs from the host, resolved once.
type env struct {
	moduleRoot string
	qemu       string
	busybox    string
	kernels    []Kernel
	missing    map[string]string // kernel name -> why it is absent
	bin        Binaries
}

// TestTopologies boots every catalogue topology on every kernel present and checks
// the guest against the catalogue and the kernel: see the package documentation.
func TestTopologies(t *testing.T) {
	e := hostEnv(t)
	var (
		mu      sync.Mutex
		summary []string
	)
	start := time.Now()
	t.Cleanup(func() {
		// Plain stdout, not t.Log, so that `make test-vm` can grep the table.
		for _, l := range summary {
			fmt.Println(l)
		}
		fmt.Printf("vmtest total %d runs %.0fs\n", len(summary), time.Since(start).Seconds())
	})
	for _, topo := range Catalogue() {
		for _, kname := range []string{KernelDebian, KernelOracle} {
			run := topo.Name + "-" + kname
			t.Run(run, func(t *testing.T) {
				var secs float64
				t.Cleanup(func() {
					result := "PASS"
					switch {
					case t.Failed():
						result = "FAIL"
					case t.Skipped():
						result = "SKIP"
					}
					mu.Lock()
					summary = append(summary, fmt.Sprintf("vmtest %-22s %-7s %s %5.1fs", topo.Name, kname, result, secs))
					mu.Unlock()
				})
				if topo.OnlyOn != "" && topo.OnlyOn != kname {
					t.Skipf("%s is for the %s kernel only", topo.Name, topo.OnlyOn)
				}
				k, ok := e.kernel(kname)
				if !ok {
					SkipOrFail(t, "kernel %s: %s", kname, e.missing[kname])
				}
				if topo.hasVFs() && kname == KernelDebian && k.PFStub == "" {
					SkipOrFail(t, "SR-IOV on Debian's kernel needs its pci-pf-stub.ko: rerun scripts/fetch-kernel.sh (or set P2PKIT_DEBIAN_PFSTUB)")
				}
				checkTopology(t, e, topo, k, run, &secs)
			})
		}
	}
}

// checkTopology boots topo on k, keeps the captures and runs every check. It sets
// *secs to the guest's wall time as soon as the guest is down.
func checkTopology(t *testing.T, e *env, topo *Topology, k Kernel, run string, secs *float64) {
	captures, bin, fix := guestCaptures(e, topo, k)
	boot := Boot{Topology: topo, Kernel: k, Busybox: e.busybox, QEMU: e.qemu, Bin: bin,
		Captures: captures, MemMiB: guestMemMiB, SMP: guestSMP, Timeout: guestTimeout, WorkDir: t.TempDir()}
	res, err := boot.Run(t.Context())
	*secs = res.Duration.Seconds()
	if err != nil {
		t.Logf("qemu: %s", strings.Join(res.Cmdline, " "))
		t.Fatalf("boot: %v\nconsole tail:\n%s", err, tail(res.Raw, 4000))
	}
	sec := res.Console.Sections
	t.Logf("%s booted %s in %.1fs", k.Name, strings.TrimSpace(string(sec["uname"].Data)), *secs)
	if s, ok := sec["setup"]; ok && s.Status != 0 {
		t.Fatalf("guest setup failed (status %d):\n%s", s.Status, s.Data)
	}
	for _, c := range []Capture{CaptureRelease, CaptureDmesg, CapturePCI} {
		if s, ok := sec[c.Name]; !ok || s.Status != 0 || len(s.Data) == 0 {
			t.Fatalf("guest capture %s missing or failed (status %d):\n%s", c.Name, s.Status, s.Data)
		}
	}

	dump, err := ParsePCIDump(sec[CapturePCI.Name].Data)
	if err != nil {
		t.Fatal(err)
	}
	var oracle *Oracle
	if k.Oracle {
		o, err := ParseOracle(sec["dmesg"].Data)
		if err != nil {
			t.Fatal(err)
		}
		oracle = &o
	}
	dir := filepath.Join(e.moduleRoot, "testdata", "vm", run)
	keep(t, dir, res, oracle, boot)

	checkGuest(t, e, topo, k, guest{dump: dump, oracle: oracle, sec: sec, fix: fix})
}

// guest is what one boot gave: the guest's PCI dump, the oracle's verdicts
// (nil on a stock kernel), the console sections, and whether the fix steps ran.
type guest struct {
	dump   View
	oracle *Oracle
	sec    map[string]Section
	fix    bool
}

// guestCaptures lists what the guest runs for topo on k, with the binaries it
// needs; fix reports whether the fix steps are among them.
func guestCaptures(e *env, topo *Topology, k Kernel) (captures []Capture, bin Binaries, fix bool) {
	captures = []Capture{}
	if e.bin.P2PCheckErr == nil {
		captures = append(captures,
			Capture{Name: "snapshot.tar.gz", Shell: "p2pcheck snapshot -o /tmp/s.tar.gz", File: "/tmp/s.tar.gz"},
			Capture{Name: "topo.json", Shell: "p2pcheck topo --format json"},
			Capture{Name: "pairs.json", Shell: "p2pcheck pairs --all --format json"})
	}
	fix = topo.Fix && k.Oracle && e.bin.P2PCheckErr == nil
	if fix {
		captures = append(captures, fixBefore...)
	}
	if topo.Persisted && e.bin.P2PCheckErr == nil {
		captures = append(captures, fixPersisted)
	}
	if topo.VirtHost != nil && e.bin.P2PCheckErr == nil {
		captures = append(captures, topo.virtCaptures()...)
	}
	bin = e.bin
	bin.P2PMemTest = "" // 8 MB the guest needs only for the p2pmem proof
	if topo.P2PMem != nil && k.Oracle && e.bin.P2PMemErr == nil {
		bin.P2PMemTest = e.bin.P2PMemTest
		prov, _ := topo.Address(topo.P2PMem.Provider)
		target, _ := topo.Address(topo.P2PMem.Target)
		captures = append(captures, Capture{Name: "p2pmem.txt", Shell: fmt.Sprintf(
			"n=$(ls /sys/bus/pci/devices/%s/nvme) && P2PKIT_REQUIRE_HW=1 "+
				"P2PKIT_P2PMEM_PROVIDER=%s P2PKIT_P2PMEM_TARGET=/dev/${n}n1 "+
				"p2pmem.test -test.run '^TestGuestRoundTrip$' -test.v -test.count=1", target, prov)})
	}
	if fix {
		captures = append(captures, fixAfter...)
	}
	return captures, bin, fix
}

// checkGuest runs the subtests of one boot: the tree, the kernel's facts, the
// oracle, and each capture p2pcheck made in the guest.
func checkGuest(t *testing.T, e *env, topo *Topology, k Kernel, g guest) {
	dump, oracle, sec := g.dump, g.oracle, g.sec
	t.Run("tree", func(t *testing.T) {
		// The guest's own view (busybox, no p2pkit code) against what the entry built.
		for _, d := range DiffFuncs(topo.Want(), dump.Funcs) {
			t.Error(d)
		}
	})
	t.Run("kernel-facts", func(t *testing.T) { checkFacts(t, topo, k, dump) })
	if oracle != nil {
		t.Run("oracle", func(t *testing.T) { checkOracleShape(t, topo, dump, *oracle) })
	}
	t.Run("snapshot", func(t *testing.T) {
		if e.bin.P2PCheckErr != nil {
			t.Fatalf("p2pcheck did not build, so nothing was captured: %v", e.bin.P2PCheckErr)
		}
		if l := sec["snapshot.tar.gz.log"]; l.Status != 0 {
			t.Fatalf("p2pcheck snapshot in the guest: status %d:\n%s", l.Status, l.Data)
		}
		checkSnapshot(t, topo, dump, sec["snapshot.tar.gz"].Data)
	})
	t.Run("topo", func(t *testing.T) {
		if e.bin.P2PCheckErr != nil {
			t.Fatalf("p2pcheck did not build: %v", e.bin.P2PCheckErr)
		}
		s := sec["topo.json"]
		if s.Status != 0 {
			t.Fatalf("p2pcheck topo: status %d:\n%s", s.Status, s.Data)
		}
		checkTopo(t, topo, dump, s.Data)
	})
	if oracle != nil {
		t.Run("pairs", func(t *testing.T) {
			if e.bin.P2PCheckErr != nil {
				t.Fatalf("p2pcheck did not build: %v", e.bin.P2PCheckErr)
			}
			s := sec["pairs.json"]
			if s.Status != 0 {
				t.Fatalf("p2pcheck pairs: status %d:\n%s", s.Status, s.Data)
			}
			checkPairs(t, withVFs(t, *oracle, dump), dump, s.Data)
		})
	}
	checkGuestSteps(t, e, topo, k, g)
}

// checkGuestSteps runs the subtests of the optional steps: fix, persisted, the
// virtualization host and the p2pmem round trip.
func checkGuestSteps(t *testing.T, e *env, topo *Topology, k Kernel, g guest) {
	dump, oracle, sec, fix := g.dump, g.oracle, g.sec, g.fix
	if topo.Fix && oracle != nil {
		t.Run("fix", func(t *testing.T) {
			if !fix {
				t.Fatalf("p2pcheck did not build: %v", e.bin.P2PCheckErr)
			}
			rerun, err := ParseOracleRerun(sec["rerun.txt"].Data)
			if err != nil {
				t.Fatal(err)
			}
			checkFix(t, topo, dump, *oracle, rerun, func(name string) ([]byte, bool) {
				s, ok := sec[name]
				return s.Data, ok && s.Status == 0
			})
		})
	}
	if topo.Persisted {
		t.Run("persisted", func(t *testing.T) {
			checkPersisted(t, topo, oracle, func(name string) ([]byte, bool) {
				s, ok := sec[name]
				return s.Data, ok && s.Status == 0
			})
		})
	}
	if topo.VirtHost != nil {
		t.Run("virt-host", func(t *testing.T) {
			checkVirtHost(t, topo, k, dump, oracle, func(name string) ([]byte, bool) {
				s, ok := sec[name]
				return s.Data, ok && s.Status == 0
			})
		})
	}
	if topo.P2PMem != nil && k.Oracle {
		t.Run("p2pmem", func(t *testing.T) {
			if e.bin.P2PMemErr != nil {
				t.Fatalf("p2pmem test binary did not build: %v", e.bin.P2PMemErr)
			}
			s := sec["p2pmem.txt"]
			if s.Status != 0 || !bytes.Contains(s.Data, []byte("--- PASS: TestGuestRoundTrip")) ||
				!bytes.Contains(s.Data, []byte("P2PMEM ROUNDTRIP PASS")) {
				t.Errorf("TestGuestRoundTrip in the guest (status %d) did not pass:\n%s", s.Status, s.Data)
			}
		})
	}
}

// keep writes the run's captures to testdata/vm/<run>/ under -update (the flag of
// package testsupport) or P2PKIT_VM_UPDATE=1; otherwise it
// compares the deterministic ones (busybox view, oracle lines) with the kept copies,
// so that a change in QEMU or a kernel shows up instead of silently shifting
// fixtures other packages test against.
func keep(t *testing.T, dir string, res Result, o *Oracle, b Boot) {
	files := map[string][]byte{"pci.txt": res.Console.Sections[CapturePCI.Name].Data}
	if o != nil {
		files["oracle.txt"] = o.Lines()
	}
	if s, ok := res.Console.Sections["rerun.txt"]; ok {
		if rerun, err := ParseOracleRerun(s.Data); err == nil {
			files["oracle-rerun.txt"] = rerun.Lines()
		}
	}
	if !testsupport.Update() && os.Getenv("P2PKIT_VM_UPDATE") != "1" {
		for name, data := range files {
			old, err := os.ReadFile(filepath.Join(dir, name))
			if errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s/%s missing: run the tier with P2PKIT_VM_UPDATE=1", dir, name)
				continue
			}
			if !bytes.Equal(old, data) {
				t.Errorf("%s/%s differs from this guest's (QEMU or kernel changed?): rerun with P2PKIT_VM_UPDATE=1 and review the diff", dir, name)
			}
		}
		return
	}
	// A rewrite without p2pcheck would drop the snapshots other packages test with.
	if b.Bin.P2PCheckErr != nil {
		t.Fatalf("not rewriting %s: p2pcheck did not build: %v", dir, b.Bin.P2PCheckErr)
	}
	for _, name := range append([]string{"snapshot.tar.gz", "topo.json", "pairs.json", "p2pmem.txt"}, fixKept...) {
		if s, ok := res.Console.Sections[name]; ok && s.Status == 0 {
			files[name] = s.Data
		}
	}
	args := slices.Clone(res.Cmdline)
	for i := range args {
		args[i] = strings.ReplaceAll(args[i], b.WorkDir, "$WORK")
		args[i] = strings.ReplaceAll(args[i], b.Kernel.Path, "$KERNEL")
	}
	files["meta.txt"] = fmt.Appendf(nil, "topology: %s\ndoc: %s\nkernel: %s %s\nqemu: %s\n",
		b.Topology.Name, b.Topology.Doc, b.Kernel.Name,
		strings.TrimSpace(string(res.Console.Sections["uname"].Data)), strings.Join(args, " "))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// hostEnv finds QEMU, busybox and the kernels, and builds the guest binaries once.
// Overrides: P2PKIT_QEMU, P2PKIT_BUSYBOX, P2PKIT_ORACLE_KERNEL, P2PKIT_DEBIAN_KERNEL
// (with P2PKIT_DEBIAN_PFSTUB, its pci-pf-stub.ko), P2PKIT_CACHE (where
// scripts/fetch-kernel.sh put Debian's kernel).
func hostEnv(t *testing.T) *env {
	t.Helper()
	e := &env{missing: map[string]string{}}
	var err error
	if e.moduleRoot, err = moduleRoot(); err != nil {
		t.Fatal(err)
	}
	e.qemu = os.Getenv("P2PKIT_QEMU")
	if e.qemu == "" {
		if e.qemu, err = exec.LookPath("qemu-system-x86_64"); err != nil {
			SkipOrFail(t, "qemu-system-x86_64 not found (apt-get install qemu-system-x86): %v", err)
		}
	}
	e.busybox = cmp.Or(os.Getenv("P2PKIT_BUSYBOX"), "/bin/busybox")
	if err := isStaticELF(e.busybox); err != nil {
		SkipOrFail(t, "no static busybox (apt-get install busybox-static): %v", err)
	}
	cache := os.Getenv("P2PKIT_CACHE")
	if cache == "" {
		if uc, err := os.UserCacheDir(); err == nil {
			cache = filepath.Join(uc, "p2pkit")
		}
	}
	for _, k := range []struct {
		name, env, path, hint string
		oracle                bool
	}{
		{KernelDebian, "P2PKIT_DEBIAN_KERNEL", DebianKernelPath(cache), "run scripts/fetch-kernel.sh", false},
		{KernelOracle, "P2PKIT_ORACLE_KERNEL", OracleKernelPath(e.moduleRoot), "the P2PDMA test kernel: see README.md, \"The kernel-in-the-loop tier\"", true},
	} {
		p := cmp.Or(os.Getenv(k.env), k.path)
		if _, err := os.Stat(p); err != nil {
			e.missing[k.name] = fmt.Sprintf("%v (%s, or set %s)", err, k.hint, k.env)
			continue
		}
		kern := Kernel{Name: k.name, Path: p, Oracle: k.oracle}
		if k.name == KernelDebian {
			// The module must match the kernel: an overridden kernel takes its own.
			stub := DebianPFStubPath(cache)
			if os.Getenv(k.env) != "" {
				stub = os.Getenv("P2PKIT_DEBIAN_PFSTUB")
			}
			if _, err := os.Stat(stub); err == nil {
				kern.PFStub = stub
			}
		}
		e.kernels = append(e.kernels, kern)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go tool: %v", err)
	}
	e.bin = Build(t.Context(), goTool, e.moduleRoot, t.TempDir())
	if e.bin.P2PCheckErr != nil {
		t.Logf("p2pcheck checks will fail: %v", e.bin.P2PCheckErr)
		e.bin.P2PCheck = ""
	}
	if e.bin.P2PMemErr != nil {
		t.Logf("p2pmem checks will fail: %v", e.bin.P2PMemErr)
		e.bin.P2PMemTest = ""
	}
	return e
}

func (e *env) kernel(name string) (Kernel, bool) {
	for _, k := range e.kernels {
		if k.Name == name {
			return k, true
		}
	}
	return Kernel{}, false
}

// moduleRoot walks up from the working directory (the package directory under go
// test) to the directory holding go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("vmtest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// isStaticELF rejects a missing file and a dynamically linked one (a busybox that
// needs libc cannot run alone in the initramfs).
func isStaticELF(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked", path)
		}
	}
	return nil
}
