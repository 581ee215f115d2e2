package hostfs_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/hostfs"
)

// TestWalker: directories opened through a Walker in sorted order read as the
// root reads them, whether the next name is below, beside or above the last;
// a name that begins with the last one but is not below it (a/bc after a/b) is
// beside it; a missing element is an error naming it.
func TestWalker(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"a/b/c", "a/b/d", "a/b", "a/bc", "a/e", "f"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, d, "name"), []byte(d), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := hostfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	w := hostfs.NewWalker(root)
	defer w.Close()
	buf := make([]byte, 16)
	for _, name := range []string{"a/b/c", "a/b/c", "a/b/d", "a/bc", "a/b", "a/bc", "a/e", "f", "a/b/c"} {
		d, err := w.Open(name)
		if err != nil {
			t.Fatalf("Open(%s): %v", name, err)
		}
		n, err := d.Read("name", buf, false)
		if err != nil || string(buf[:n]) != name {
			t.Errorf("Open(%s): name reads %q, %v", name, buf[:n], err)
		}
	}
	_, err = w.Open("a/x/y")
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Path != "/a/x" || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("Open(a/x/y) = %v, want an error naming /a/x", err)
	}
}
