package check_test

import (
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/internal/fixture"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/snapshot"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// captures maps the real machines kept in the repository to their snapshots:
// the GPU machines of testdata (h200-2gpu-vm, ...), the QEMU guests booted with
// the P2PDMA oracle kernel, and the QEMU captures of testdata/vm (named vm/<dir>).
var captures = func() map[string]string {
	m := map[string]string{}
	for _, g := range []struct{ glob, prefix string }{
		{"../testdata/*/snapshot.tar.gz", ""},
		{"../p2pdma/testdata/*/snapshot.tar.gz", ""},
		{"../testdata/vm/*/snapshot.tar.gz", "vm/"},
	} {
		paths, _ := filepath.Glob(g.glob)
		for _, p := range paths {
			m[g.prefix+filepath.Base(filepath.Dir(p))] = p
		}
	}
	return m
}()

// machines lists every machine the golden tests cover: each named fixture
// except "large" (a benchmark tree), then the captures.
func machines() []string {
	var out []string
	for _, n := range fixture.Names() {
		if n != "large" {
			out = append(out, n)
		}
	}
	var caps []string
	for n := range captures {
		caps = append(caps, n)
	}
	slices.Sort(caps)
	return append(out, caps...)
}

// fixtureRoot holds the fixture trees the tests write, once per run.
var fixtureRoot string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "check-fixtures-")
	if err != nil {
		panic(err)
	}
	fixtureRoot = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// loaded caches machines by name; tests copy the Node before changing it.
var loaded = map[string]*node.Node{}

// loadMachine reads a named fixture (written below fixtureRoot) or capture,
// without pci.ids names so that results do not depend on the host. The result
// is a copy the caller may change.
func loadMachine(t *testing.T, name string) *node.Node {
	t.Helper()
	if n, ok := loaded[name]; ok {
		c := *n
		return &c
	}
	var fsys hostfs.Root
	var err error
	if path, ok := captures[name]; ok {
		fsys, err = snapshot.Open(path)
		if err != nil {
			t.Fatal(err)
		}
	} else {
		m, err := fixture.ByName(name)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(fixtureRoot, name)
		if err := m.Write(dir); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Lstat(filepath.Join(dir, "dev/gdrdrv")); err == nil && fi.Mode()&fs.ModeCharDevice == 0 {
			t.Skip("this fixture's /dev/gdrdrv is a device node only when written as root")
		}
		fsys, err = hostfs.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
	}
	defer fsys.Close()
	n, err := node.Load(fsys, node.Options{NoNames: true})
	if err != nil {
		t.Fatal(err)
	}
	loaded[name] = n
	c := *n
	return &c
}

// testMeta is the fixed metadata of golden reports.
var testMeta = check.Meta{ToolVersion: "test", Hostname: "node1", Timestamp: time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)}

// report runs every check on a machine read as a snapshot.
func report(t *testing.T, name string) check.Report {
	t.Helper()
	f := check.NewFacts(loadMachine(t, name), check.Inputs{Source: check.Snapshot, NoNVML: "NVML not queried: a snapshot carries no NVML state"})
	res, err := check.Run(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	return check.NewReport(f, res, testMeta)
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from the golden file (run go test -update and review the diff):\n%s", path, diffLines(string(want), string(got)))
	}
}

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}
