// Package testsupport holds what the tests of several packages share: the
// comparison with golden files and its -update flag, fixture machines written to
// a temporary root, such a root or a snapshot opened (and closed when the test
// ends), PCI addresses, the committed JSON schemas, and the parsing of Prometheus
// textfiles.
//
// The test support is this directory, in three layers, because Go refuses a test
// that imports, even indirectly, the package it tests:
//
//   - testsupport/roottest imports only hostfs: test trees written to a
//     directory, packed into a tar or built in memory, and snapshots unpacked
//     into a root, for the tests of the readers (hostfs, sysfs, procfs,
//     snapshot);
//   - this package builds on the readers and internal/testtools/fixture, but imports
//     neither node nor what node is built from (p2pdma, pathclass), so that
//     their in-package tests may use it;
//   - testsupport/testnode loads whole machines through package node, for
//     everything above it.
//
// # Golden files
//
// [Golden] compares a test's output with a file under the package's testdata. A
// test binary that links this package takes one flag, -update, which makes Golden
// write the output instead of comparing it. After a deliberate change of output,
// rewrite the files of one package (or of one test) and review the diff:
//
//	go test ./render -update
//	go test ./cmd/p2pcheck -run TestTree -update
//
// A test binary that does not link this package rejects the flag, so name the
// packages with golden files rather than ./...:
//
//	go test ./check ./cmd/p2pcheck ./gpu ./nccl ./provision ./render -update
package testsupport

import (
	"bytes"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/snapshot"
	"github.com/p2pkit/p2pkit/sysfs"
)

var update = flag.Bool("update", false, "rewrite the golden files the tests compare with")

// Update reports whether the test binary runs with -update: golden files, and
// anything else a test keeps in step with its output, are to be rewritten.
func Update() bool { return *update }

// Golden compares got with the file at path (relative to the package directory),
// line by line, and fails tb with the difference. Under -update it writes got to
// path instead, creating its directory.
func Golden(tb testing.TB, path string, got []byte) {
	tb.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (go test -update writes it)", err)
	}
	if diff := DiffLines(string(want), string(got)); diff != "" {
		tb.Errorf("%s differs from the output (-want +got; go test -update rewrites it):\n%s", path, diff)
	}
}

// Compare is Golden for a file that another package's test writes (owner names
// that package): it compares got with path, line by line, and never writes,
// not even under -update, so that each golden file has one writer.
func Compare(tb testing.TB, path, owner string, got []byte) {
	tb.Helper()
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if diff := DiffLines(string(want), string(got)); diff != "" {
		tb.Errorf("%s, which go test %s -update writes, differs from the output (-want +got):\n%s", path, owner, diff)
	}
}

// DiffLines is cmp.Diff of want and got split into lines: empty when they are
// equal, else one line per changed line.
func DiffLines(want, got string) string {
	return cmp.Diff(strings.Split(want, "\n"), strings.Split(got, "\n"))
}

// Fixture returns the named machine of package fixture, failing tb for an
// unknown name.
func Fixture(tb testing.TB, name string) *fixture.Machine {
	tb.Helper()
	m, err := fixture.ByName(name)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// Root writes m to a fresh temporary directory of tb and returns it. Device
// nodes are written as empty regular files with the nodes' modes
// ([fixture.Machine.NoDeviceNodes], which it sets on m): a real node would open
// whatever driver owns its major on the machine running the test.
func Root(tb testing.TB, m *fixture.Machine) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "root")
	if err := m.NoDeviceNodes().Write(dir); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// RootWithDevices writes m, with its device nodes, to a fresh temporary
// directory of tb and returns it, for tests whose outcome depends on dev/gdrdrv
// being a character device. Only root can create one, so elsewhere it skips tb
// when m has such a node.
func RootWithDevices(tb testing.TB, m *fixture.Machine) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "root")
	if err := m.Write(dir); err != nil {
		tb.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "dev", "gdrdrv")); err == nil && fi.Mode()&fs.ModeCharDevice == 0 {
		tb.Skip("this fixture's /dev/gdrdrv is a device node only when written as root")
	}
	return dir
}

// OpenRoot opens the tree under dir, as p2pcheck --root does, and closes it
// when tb ends.
func OpenRoot(tb testing.TB, dir string) hostfs.Root {
	tb.Helper()
	r, err := hostfs.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Close() })
	return r
}

// OpenSnapshot opens the snapshot file at path, as p2pcheck --snapshot does,
// and closes it when tb ends.
func OpenSnapshot(tb testing.TB, path string) hostfs.Root {
	tb.Helper()
	r, err := snapshot.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Close() })
	return r
}

// Topology builds the PCIe topology of the functions under root.
func Topology(tb testing.TB, root hostfs.Root) *pcie.Topology {
	tb.Helper()
	recs, err := sysfs.New(root).PCIRecords()
	if err != nil {
		tb.Fatal(err)
	}
	return pcie.NewTopology(recs)
}

// Device returns the function of topo that m labelled label (fixture's
// Machine.Func), failing tb when m has no such label or topo no such function.
func Device(tb testing.TB, topo *pcie.Topology, m *fixture.Machine, label string) *pcie.Device {
	tb.Helper()
	f := m.Func(label)
	if f == nil {
		tb.Fatalf("no function labelled %q", label)
	}
	d := topo.Device(f.Address())
	if d == nil {
		tb.Fatalf("%s (%s) not in the topology", label, f.Address())
	}
	return d
}

// Metrics parses the Prometheus text exposition format (what node_exporter's
// textfile collector reads), failing tb when it does not parse.
func Metrics(tb testing.TB, r io.Reader) map[string]*dto.MetricFamily {
	tb.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		tb.Fatalf("textfile does not parse: %v", err)
	}
	return fams
}

// MetricsFile parses the Prometheus textfile at path (see Metrics).
func MetricsFile(tb testing.TB, path string) map[string]*dto.MetricFamily {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	return Metrics(tb, f)
}

// schemaBase is where the schemas of the repository's schema/ directory are
// published: their $id, by which they refer to each other.
const schemaBase = "https://github.com/p2pkit/p2pkit/schema/"

// Schema compiles the JSON schema at path, a file of the repository's schema/
// directory, with formats asserted, and returns a validator of JSON documents.
// Every schema of that directory is registered under its published address
// first, so that references between them resolve to the committed files.
func Schema(tb testing.TB, path string) func([]byte) error {
	tb.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	files, err := filepath.Glob(filepath.Join(filepath.Dir(path), "*.json"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no schemas beside %s (%v)", path, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		if err := c.AddResource(schemaBase+filepath.Base(f), doc); err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
	}
	sch, err := c.Compile(schemaBase + filepath.Base(path))
	if err != nil {
		tb.Fatal(err)
	}
	return func(b []byte) error {
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return err
		}
		return sch.Validate(inst)
	}
}

// Addr parses a PCI address ("0000:1a:00.0", or "1a:00.0" in domain 0), failing
// tb when it does not parse.
func Addr(tb testing.TB, s string) pcie.Address {
	tb.Helper()
	a, err := pcie.ParseAddress(s)
	if err != nil {
		tb.Fatal(err)
	}
	return a
}
