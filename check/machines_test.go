package check_test

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/node"
)

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

// loaded caches machines by name; tests copy the Node before changing it.
var loaded = map[string]*node.Node{}

// loadMachine reads a named fixture (with its device nodes) or capture,
// without pci.ids names so that results do not depend on the host. The result
// is a copy the caller may change.
func loadMachine(t *testing.T, name string) *node.Node {
	t.Helper()
	if n, ok := loaded[name]; ok {
		c := *n
		return &c
	}
	opt := node.Options{NoNames: true}
	var n *node.Node
	if path, ok := captures[name]; ok {
		n = testnode.Snapshot(t, path, opt)
	} else {
		n = testnode.Root(t, testsupport.RootWithDevices(t, testsupport.Fixture(t, name)), opt)
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

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}
