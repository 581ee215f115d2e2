package hostfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/roottest"
	"github.com/p2pkit/p2pkit/snapshot"
)

type entry = roottest.Entry

var (
	file      = roottest.File
	symlink   = roottest.Symlink
	directory = roottest.Dir
)

// dirRoot is a Root on disk and the directory it stands at.
type dirRoot struct {
	hostfs.Root
	dir string
}

// openBoth returns the same entries as a root on disk and as a snapshot loaded into
// memory.
func openBoth(t *testing.T, entries []entry) (dirRoot, hostfs.Root) {
	t.Helper()
	dir := t.TempDir()
	roottest.WriteTree(t, dir, entries)
	d, err := hostfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	m, err := snapshot.Read(bytes.NewReader(roottest.TarGz(t, entries)))
	if err != nil {
		t.Fatal(err)
	}
	return dirRoot{d, dir}, m
}

func TestOpen(t *testing.T) {
	if _, err := hostfs.Open(filepath.Join(t.TempDir(), "none")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing root: err = %v, want fs.ErrNotExist", err)
	}
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := hostfs.Open(f); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("file root: err = %v, want not a directory", err)
	}
	root, err := hostfs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := root.Close(); err != nil {
		t.Error(err)
	}
	if err := root.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestLinksStayInside checks link resolution on both kinds of root: links that stay
// inside resolve, links that leave are errors and nothing outside is read.
func TestLinksStayInside(t *testing.T) {
	entries := []entry{
		file("sys/a/file", "inside\n"),
		symlink("sys/b/rel", "../a/file"),
		symlink("sys/b/dir", "../a"),
		symlink("sys/b/chain", "rel"),
		symlink("sys/b/up", "../../../outside"),
		symlink("sys/b/abs", "/etc/passwd"),
		symlink("sys/b/loop", "loop"),
		symlink("sys/b/dirup", "../.."),
	}
	dirFS, memFS := openBoth(t, entries)
	// Plant a file outside the directory root, where an escaping link would lead.
	outside := filepath.Join(filepath.Dir(dirFS.dir), "outside")
	if err := os.WriteFile(outside, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		want    string
		wantErr bool
	}{
		{"sys/b/rel", "inside\n", false},
		{"sys/b/dir/file", "inside\n", false},
		{"sys/b/chain", "inside\n", false},
		{"sys/b/dirup/sys/a/file", "inside\n", false},
		{"sys/b/up", "", true},
		{"sys/b/abs", "", true},
		{"sys/b/loop", "", true},
		{"sys/b/missing", "", true},
		{"sys/../../outside", "", true},
	}
	for kind, fsys := range map[string]hostfs.Root{"dir": dirFS.Root, "snapshot": memFS} {
		for _, tt := range tests {
			b, err := fsys.ReadFile(tt.name, 4096)
			if (err != nil) != tt.wantErr || string(b) != tt.want {
				t.Errorf("%s: read %s = %q, %v; want %q, error %t", kind, tt.name, b, err, tt.want, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "/"+tt.name) {
				t.Errorf("%s: error %v does not name /%s", kind, err, tt.name)
			}
		}
		if _, err := fsys.LinkTarget("sys/b/up"); err == nil || !strings.Contains(err.Error(), "outside the root") {
			t.Errorf("%s: linkTarget(sys/b/up) err = %v, want it to leave the root", kind, err)
		}
		if got, err := fsys.LinkTarget("sys/b/rel"); err != nil || got != "sys/a/file" {
			t.Errorf("%s: linkTarget(sys/b/rel) = %q, %v", kind, got, err)
		}
	}
	if _, err := memFS.ReadFile("sys/b/missing", 4096); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file error %v is not fs.ErrNotExist", err)
	}
	if _, err := dirFS.ReadFile("sys/b/missing", 4096); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file error %v is not fs.ErrNotExist", err)
	}
}

// TestTreesAgree runs every tree operation on a directory below the root of both
// kinds of FS: results must match, errors must match in kind. On Linux the directory
// side is the descriptor tree with its os.Root fallbacks.
func TestTreesAgree(t *testing.T) {
	dirFS, memFS := openBoth(t, []entry{
		file("sys/x/a/file", "inside\n"),
		symlink("sys/x/b/rel", "../a/file"),
		symlink("sys/x/b/dir", "../a"),
		symlink("sys/x/b/up", "../../../outside"),
		symlink("sys/x/b/loop", "loop"),
		directory("sys/x/empty"),
		// Chains of 8 and 9 links: the first resolves, the second is too long.
		symlink("sys/x/c/l1", "l2"), symlink("sys/x/c/l2", "l3"), symlink("sys/x/c/l3", "l4"),
		symlink("sys/x/c/l4", "l5"), symlink("sys/x/c/l5", "l6"), symlink("sys/x/c/l6", "l7"),
		symlink("sys/x/c/l7", "l8"), symlink("sys/x/c/l8", "../a/file"), symlink("sys/x/c/l0", "l1"),
	})
	type result struct {
		Out string
		Err bool
	}
	run := func(fsys hostfs.Root) map[string]result {
		sub, err := fsys.Sub("sys/x")
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		res := map[string]result{}
		put := func(op string, out any, err error) {
			res[op] = result{Out: fmt.Sprint(out), Err: err != nil}
		}
		buf := make([]byte, 64)
		for _, name := range []string{"a/file", "b/rel", "b/dir/file", "b/up", "b/loop", "a", "missing", "c/l1", "c/l0"} {
			n, err := sub.Read(name, buf, false)
			put("readFile "+name, string(buf[:n]), err)
			b, err := sub.ReadFile(name, 4)
			put("ReadFile "+name, string(b), err)
			fi, err := sub.Lstat(name)
			put("lstat "+name, fi.Mode.Type(), err)
			target, err := sub.ReadLink(name)
			put("readLink "+name, target, err)
		}
		for _, name := range []string{".", "a", "b", "b/dir", "empty", "a/file", "b/up", "missing"} {
			names, err := sub.Names(name)
			put("names "+name, names, err)
			ents, err := sub.ReadDir(name)
			put("readDir "+name, ents, err)
			if s, err := sub.Sub(name); err != nil {
				put("sub "+name, nil, err)
			} else {
				names, err := s.Names(".")
				put("sub "+name, names, err)
				s.Close()
			}
		}
		return res
	}
	mem := run(memFS)
	if r := mem["readFile b/dir/file"]; r.Out != "inside\n" || r.Err {
		t.Errorf("reading through a directory link = %+v", r)
	}
	if r, r0 := mem["readFile c/l1"], mem["readFile c/l0"]; r.Out != "inside\n" || !r0.Err {
		t.Errorf("8 links = %+v, 9 links = %+v; want the first read, the second refused", r, r0)
	}
	if diff := cmp.Diff(mem, run(dirFS.Root)); diff != "" {
		t.Errorf("trees disagree (-snapshot +dir):\n%s", diff)
	}
}

func TestPathError(t *testing.T) {
	for _, tt := range []struct{ name, want string }{
		{"sys/bus/pci/devices", "sysfs: read /sys/bus/pci/devices: file does not exist"},
		{"proc/cpuinfo", "procfs: read /proc/cpuinfo: file does not exist"},
		{"dev/gdrdrv", "procfs: read /dev/gdrdrv: file does not exist"},
		{"boot/config-6.1", "procfs: read /boot/config-6.1: file does not exist"},
		{"p2pkit/manifest.json", "hostfs: read /p2pkit/manifest.json: file does not exist"},
		{"system", "hostfs: read /system: file does not exist"},
	} {
		// A path already in the error is replaced by the root-relative one.
		err := hostfs.PathError("read", tt.name, &fs.PathError{Op: "open", Path: "/tmp/x/" + tt.name, Err: fs.ErrNotExist})
		if err.Error() != tt.want || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("PathError(%q) = %v, want %s", tt.name, err, tt.want)
		}
	}
}

func TestFileKind(t *testing.T) {
	for m, want := range map[fs.FileMode]string{
		0o644:                  "a regular file",
		fs.ModeDir | 0o755:     "a directory",
		fs.ModeSymlink | 0o777: "a symbolic link",
		fs.ModeDevice | fs.ModeCharDevice | 0o666: "a character device",
		fs.ModeDevice | 0o660:                     "a block device",
		fs.ModeNamedPipe | 0o600:                  "a named pipe",
		fs.ModeSocket | 0o700:                     "a socket",
		fs.ModeIrregular:                          "mode ?---------",
	} {
		if got := hostfs.FileKind(m); got != want {
			t.Errorf("FileKind(%v) = %q, want %q", m, got, want)
		}
	}
}
