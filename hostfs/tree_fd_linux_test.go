package hostfs_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/hostfs"
)

// TestSubReadDirLstat: below a directory opened with Sub (a bare descriptor on
// Linux), ReadDir and Lstat answer as they do through the root itself (an
// os.Root), for every kind of entry, and a link is still not followed.
func TestSubReadDirLstat(t *testing.T) {
	dir := t.TempDir()
	d := filepath.Join(dir, "sys/devices/pci0000:00")
	if err := os.MkdirAll(filepath.Join(d, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "config"), []byte("x"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("config", filepath.Join(d, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(d, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Enough entries that the listing takes more than one getdents buffer.
	for i := range 400 {
		name := filepath.Join(d, "sub", "attribute_with_a_rather_long_name_"+string(rune('a'+i%26))+string(rune('a'+i/26)))
		if err := os.WriteFile(name, nil, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	root, err := hostfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	sub, err := root.Sub("sys/devices")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for _, name := range []string{"pci0000:00", "pci0000:00/sub"} {
		want, err := root.ReadDir("sys/devices/" + name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sub.ReadDir(name)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ReadDir(%s) through Sub (-root +sub):\n%s", name, diff)
		}
	}
	pci, err := sub.Sub("pci0000:00")
	if err != nil {
		t.Fatal(err)
	}
	defer pci.Close()
	for _, name := range []string{"config", "link", "fifo", "sub", "missing"} {
		want, wantErr := root.Lstat("sys/devices/pci0000:00/" + name)
		got, gotErr := pci.Lstat(name)
		if (wantErr == nil) != (gotErr == nil) {
			t.Errorf("Lstat(%s): error %v through Sub, %v through the root", name, gotErr, wantErr)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Lstat(%s) through Sub (-root +sub):\n%s", name, diff)
		}
	}
	if ents, err := pci.ReadDir("."); err != nil || len(ents) != 4 {
		t.Errorf("ReadDir(.) = %v, %v; want 4 entries", ents, err)
	}
}

// TestReadListed: the permission bits come from the open file, alike through the
// root (an os.Root), a Sub'd directory (a bare descriptor) and a link in it; a
// name that is no longer a regular file (a FIFO, a directory) is refused unread,
// without blocking.
func TestReadListed(t *testing.T) {
	dir := t.TempDir()
	d := filepath.Join(dir, "sys/devices")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "config"), []byte("abc"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(d, "config"), 0o640); err != nil { // past the umask
		t.Fatal(err)
	}
	if err := os.Symlink("config", filepath.Join(d, "link")); err != nil {
		t.Fatal(err)
	}
	root, err := hostfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	sub, err := root.Sub("sys/devices")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	buf := make([]byte, 16)
	for _, tt := range []struct {
		r    hostfs.Root
		name string
	}{{root, "sys/devices/config"}, {sub, "config"}, {sub, "link"}} {
		n, perm, err := tt.r.ReadListed(tt.name, buf, true)
		if err != nil || string(buf[:n]) != "abc" || perm != 0o640 {
			t.Errorf("ReadListed(%s) = %q, %v, %v; want \"abc\", -rw-r-----", tt.name, buf[:n], perm, err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(d, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(d, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		want func(error) bool
	}{
		{"fifo", func(err error) bool { return errors.Is(err, hostfs.ErrNotFile) }},
		{"dir", func(err error) bool { return err != nil && strings.Contains(err.Error(), "is a directory") }},
		{"missing", func(err error) bool { return errors.Is(err, fs.ErrNotExist) }},
	} {
		if n, _, err := sub.ReadListed(tt.name, buf, true); !tt.want(err) || n != 0 {
			t.Errorf("ReadListed(%s) = %d bytes, %v", tt.name, n, err)
		}
	}
}
