package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/p2pkit/p2pkit/internal/atomicfile"
	"github.com/p2pkit/p2pkit/internal/cli"
)

// dirNames lists dir's entries.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestWriteFileAtomicNotRegular: a target that is a directory, a symbolic
// link or a FIFO is refused and left as it was, with no temporary file left.
func TestWriteFileAtomicNotRegular(t *testing.T) {
	for _, tt := range []struct {
		name string
		make func(path string) error
		kind fs.FileMode
	}{
		{"directory", func(p string) error { return os.Mkdir(p, 0o755) }, fs.ModeDir},
		{"symlink", func(p string) error { return os.Symlink("elsewhere", p) }, fs.ModeSymlink},
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o644) }, fs.ModeNamedPipe},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(dir, "out")
			if err := tt.make(target); err != nil {
				t.Skip(err)
			}
			called := false
			err := writeFileAtomic(target, true, func(*os.File) error { called = true; return nil })
			if !errors.Is(err, atomicfile.ErrNotRegular) || called {
				t.Errorf("err %v, write called %v; want errNotRegular before writing", err, called)
			}
			if fi, err := os.Lstat(target); err != nil || fi.Mode().Type() != tt.kind {
				t.Errorf("target now %v (%v), want it left %v", fi.Mode(), err, tt.kind)
			}
			if diff := cmp.Diff([]string{"out"}, dirNames(t, dir)); diff != "" {
				t.Errorf("directory (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWriteFileAtomicErrors: a write that fails leaves the old file and no
// temporary file; without force an existing file is a usage error.
func TestWriteFileAtomicErrors(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "out")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := writeFileAtomic(target, true, func(f *os.File) error {
		f.WriteString("partial")
		return boom
	}); !errors.Is(err, boom) {
		t.Errorf("err %v, want boom", err)
	}
	var ee *cli.ExitError
	if err := writeFileAtomic(target, false, func(*os.File) error { return nil }); !errors.As(err, &ee) || ee.Code != exitUsage {
		t.Errorf("without force: %v, want a usage error", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "old" {
		t.Errorf("target holds %q, want old", b)
	}
	if diff := cmp.Diff([]string{"out"}, dirNames(t, dir)); diff != "" {
		t.Errorf("directory (-want +got):\n%s", diff)
	}
	if err := writeFileAtomic(target, true, func(f *os.File) error { _, err := f.WriteString("new"); return err }); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("target mode %v (%v), want 0644", fi.Mode(), err)
	}
}

// TestWriteFileAtomicStaleTemps: a temporary file left by a killed run of the
// same target is removed by the next write once it is old; a recent one (a
// concurrent writer's) and other files stay.
func TestWriteFileAtomicStaleTemps(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "p2pcheck.prom")
	files := map[string]time.Duration{
		".p2pcheck.prom" + atomicfile.TempMarker + "123": time.Hour,
		".p2pcheck.prom" + atomicfile.TempMarker + "456": 0,
		".other" + atomicfile.TempMarker + "789":         time.Hour,
		"p2pcheck.prom.bak":                              time.Hour,
	}
	for name, age := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-age)
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeFileAtomic(target, true, func(*os.File) error { return nil }); err != nil {
		t.Fatal(err)
	}
	want := []string{".other" + atomicfile.TempMarker + "789", ".p2pcheck.prom" + atomicfile.TempMarker + "456", "p2pcheck.prom", "p2pcheck.prom.bak"}
	if diff := cmp.Diff(want, dirNames(t, dir)); diff != "" {
		t.Errorf("directory (-want +got):\n%s", diff)
	}
}

// TestFleetFilesCharDevice: as root, --prometheus and --nfd pointed at a
// character device (a /dev/null made with mknod in a temporary directory)
// leave it a character device, with a clear error and exit 3.
func TestFleetFilesCharDevice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mknod needs root")
	}
	root := machineRoot(t, "degraded-link")
	dir := t.TempDir()
	null := filepath.Join(dir, "null")
	if err := unix.Mknod(null, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Skipf("mknod: %v (no CAP_MKNOD here)", err)
	}
	for _, flag := range []string{"--prometheus", "--nfd"} {
		t.Run(flag, func(t *testing.T) {
			code, _, stderr := p2pcheck("--root", root, "--quick", flag, null)
			if code != exitNoEval || !strings.Contains(stderr, flag+": atomicfile: writing "+null+": exists and is not a regular file (a character device)") {
				t.Errorf("exit %d, stderr %q; want 3 and a clear error", code, stderr)
			}
			fi, err := os.Lstat(null)
			if err != nil || fi.Mode()&fs.ModeCharDevice == 0 {
				t.Fatalf("%s is now %v (%v), want a character device", null, fi.Mode(), err)
			}
			if diff := cmp.Diff([]string{"null"}, dirNames(t, dir)); diff != "" {
				t.Errorf("directory (-want +got):\n%s", diff)
			}
		})
	}
	code, _, stderr := p2pcheck("--root", root, "snapshot", "-o", null)
	if code != exitNoEval || !strings.Contains(stderr, "not a regular file") {
		t.Errorf("snapshot -o %s: exit %d, stderr %q; want 3 and a clear error", null, code, stderr)
	}
}
