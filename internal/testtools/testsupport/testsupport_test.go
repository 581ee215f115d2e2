package testsupport

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/roottest"
)

// recorder is a testing.TB that keeps what a helper reports; Fatal ends the
// goroutine as testing.T's does.
type recorder struct {
	testing.TB
	errors []string
	fatal  bool
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.fatal = true
	runtime.Goexit() // as testing.T.FailNow does
}

func (r *recorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

// run calls f with a recorder in its own goroutine, as a test runs.
func run(f func(tb testing.TB)) *recorder {
	r := &recorder{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		f(r)
	}()
	wg.Wait()
	return r
}

// setUpdate sets -update for the rest of t.
func setUpdate(t *testing.T, v bool) {
	old := *update
	*update = v
	t.Cleanup(func() { *update = old })
}

func TestDiffLines(t *testing.T) {
	for _, tt := range []struct {
		want, got string
		same      bool
		mentions  string
	}{
		{"a\nb\n", "a\nb\n", true, ""},
		{"", "", true, ""},
		{"a\nb\n", "a\nc\n", false, `"c"`},
		{"a\n", "a", false, `""`},
	} {
		d := DiffLines(tt.want, tt.got)
		if (d == "") != tt.same || !strings.Contains(d, tt.mentions) {
			t.Errorf("DiffLines(%q, %q) = %q; want same %t, mentioning %s", tt.want, tt.got, d, tt.same, tt.mentions)
		}
	}
}

// TestGolden: a golden file that matches passes, one that differs fails the test
// with the changed line, a missing one stops it; under -update the output is
// written, directories included, and nothing is compared.
func TestGolden(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.txt")
	if err := os.WriteFile(path, []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		path   string
		got    string
		errors int
		fatal  bool
		saying string
	}{
		{"same", path, "one\ntwo\n", 0, false, ""},
		{"a line differs", path, "one\nthree\n", 1, false, `"three"`},
		{"missing", filepath.Join(dir, "none.txt"), "x", 1, true, "-update"},
	} {
		r := run(func(tb testing.TB) { Golden(tb, tt.path, []byte(tt.got)) })
		if len(r.errors) != tt.errors || r.fatal != tt.fatal || (tt.saying != "" && !strings.Contains(strings.Join(r.errors, ""), tt.saying)) {
			t.Errorf("%s: errors %q, fatal %t; want %d errors saying %s, fatal %t", tt.name, r.errors, r.fatal, tt.errors, tt.saying, tt.fatal)
		}
		r = run(func(tb testing.TB) { Compare(tb, tt.path, "./x", []byte(tt.got)) })
		if len(r.errors) != tt.errors || r.fatal != tt.fatal {
			t.Errorf("Compare %s: errors %q, fatal %t; want %d errors, fatal %t", tt.name, r.errors, r.fatal, tt.errors, tt.fatal)
		}
	}

	setUpdate(t, true)
	written := filepath.Join(dir, "new", "dir", "out.txt")
	if r := run(func(tb testing.TB) { Golden(tb, written, []byte("fresh\n")) }); len(r.errors) != 0 {
		t.Fatalf("-update: %q", r.errors)
	}
	if b, err := os.ReadFile(written); err != nil || string(b) != "fresh\n" {
		t.Errorf("-update wrote %q, %v; want the output", b, err)
	}
	// Compare never writes: the file another package owns stays as it was.
	if r := run(func(tb testing.TB) { Compare(tb, path, "./x", []byte("other\n")) }); len(r.errors) != 1 {
		t.Errorf("Compare under -update: errors %q, want the difference", r.errors)
	}
	if b, _ := os.ReadFile(path); string(b) != "one\ntwo\n" {
		t.Errorf("Compare under -update rewrote %s: %q", path, b)
	}
}

// TestFixtureRoots writes a machine with gdrdrv both ways and reads it back.
func TestFixtureRoots(t *testing.T) {
	m := Fixture(t, "dgx-h100")
	root := Root(t, m)
	fi, err := os.Lstat(filepath.Join(root, "dev", "gdrdrv"))
	if err != nil || !fi.Mode().IsRegular() {
		t.Errorf("Root: dev/gdrdrv %v, %v; want a regular file", fi, err)
	}
	topo := Topology(t, OpenRoot(t, root))
	if d := Device(t, topo, m, "gpu0"); d.Address.String() != "0000:1a:00.0" {
		t.Errorf("gpu0 at %s, want 0000:1a:00.0", d.Address)
	}
	if r := run(func(tb testing.TB) { Device(tb, topo, m, "gpu99") }); !r.fatal {
		t.Errorf("Device of an unknown label did not stop the test")
	}
	if r := run(func(tb testing.TB) { Fixture(tb, "no-such-machine") }); !r.fatal {
		t.Errorf("Fixture of an unknown name did not stop the test")
	}

	t.Run("with devices", func(t *testing.T) {
		root := RootWithDevices(t, Fixture(t, "dgx-h100")) // skips unless root
		fi, err := os.Lstat(filepath.Join(root, "dev", "gdrdrv"))
		if err != nil || fi.Mode()&fs.ModeCharDevice == 0 {
			t.Errorf("RootWithDevices: dev/gdrdrv %v, %v; want a character device", fi, err)
		}
	})

	snap := Topology(t, OpenSnapshot(t, "../../../testdata/h200-2gpu-vm/snapshot.tar.gz"))
	if len(snap.GPUs()) != 2 {
		t.Errorf("H200 snapshot: %d GPUs, want 2", len(snap.GPUs()))
	}
}

func TestMetrics(t *testing.T) {
	fams := Metrics(t, strings.NewReader("# HELP p2pcheck_up 1 when evaluated\n# TYPE p2pcheck_up gauge\np2pcheck_up 1\n"))
	if f := fams["p2pcheck_up"]; f == nil || f.GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Errorf("p2pcheck_up = %v, want a gauge of 1", f)
	}
	if r := run(func(tb testing.TB) { Metrics(tb, strings.NewReader("p2pcheck_up{ 1\n")) }); !r.fatal {
		t.Errorf("a textfile that does not parse did not stop the test")
	}
	if r := run(func(tb testing.TB) { MetricsFile(tb, filepath.Join(t.TempDir(), "none.prom")) }); !r.fatal {
		t.Errorf("a missing textfile did not stop the test")
	}
}

// TestUnpack: a snapshot unpacked into a root reads as the snapshot does; names
// that leave the root are skipped and device nodes become regular files.
func TestUnpack(t *testing.T) {
	const h200 = "../../../testdata/h200-2gpu-vm/snapshot.tar.gz"
	root := t.TempDir()
	roottest.Unpack(t, h200, root)
	if got, want := len(Topology(t, OpenRoot(t, root)).Devices), len(Topology(t, OpenSnapshot(t, h200)).Devices); got != want || want == 0 {
		t.Errorf("unpacked: %d functions, the snapshot %d", got, want)
	}

	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	for _, h := range []tar.Header{
		{Name: "../escape", Typeflag: tar.TypeReg, Mode: 0o644},
		{Name: "/abs", Typeflag: tar.TypeReg, Mode: 0o644},
		{Name: "dev/gdrdrv", Typeflag: tar.TypeChar, Mode: 0o666, Devmajor: 235},
		{Name: "sys/link", Typeflag: tar.TypeSymlink, Linkname: "../../outside"},
	} {
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "hostile.tar.gz")
	if err := os.WriteFile(archive, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	dir := filepath.Join(parent, "root")
	roottest.Unpack(t, archive, dir)
	var names []string
	filepath.WalkDir(parent, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(parent, p)
			names = append(names, rel)
		}
		return err
	})
	if diff := cmp.Diff([]string{"root/dev/gdrdrv", "root/sys/link"}, names); diff != "" {
		t.Errorf("written (-want +got):\n%s", diff)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "dev", "gdrdrv")); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o666 {
		t.Errorf("dev/gdrdrv: %v, %v; want a regular file of mode 0666", fi, err)
	}
}

// TestSchema compiles a schema that refers to another by its published address,
// rejects documents it must, and stops the test where there is no schema.
func TestSchema(t *testing.T) {
	validate := Schema(t, "../../../schema/gdr.v1.json") // refers to report.v1.json
	for _, doc := range []string{`{}`, `not JSON`, `{"schema_version":"1"}`} {
		if err := validate([]byte(doc)); err == nil {
			t.Errorf("gdr.v1.json accepted %s", doc)
		}
	}
	if r := run(func(tb testing.TB) { Schema(tb, filepath.Join(t.TempDir(), "none.v1.json")) }); !r.fatal {
		t.Errorf("a directory without schemas did not stop the test")
	}
}
