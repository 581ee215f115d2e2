//go:build linux

package atomicfile_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/internal/atomicfile"
)

func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func writeString(s string) func(*os.File) error {
	return func(f *os.File) error { _, err := f.WriteString(s); return err }
}

// TestWriteThroughLink reproduces #21's defect 10: f0912a0's --topo-xml used
// os.Create, which follows a link at the target and truncates what it points to
// (as root, a link to /etc/passwd destroyed it). Write refuses the link and leaves
// both the link and its target as they were.
func TestWriteThroughLink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "passwd")
	if err := os.WriteFile(victim, []byte("root:x:0:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "topo.xml")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	err := atomicfile.Write(link, atomicfile.Options{Force: true}, writeString("<system/>"))
	if !errors.Is(err, atomicfile.ErrNotRegular) {
		t.Errorf("err = %v, want ErrNotRegular", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "root:x:0:0\n" {
		t.Errorf("the link's target now holds %q", b)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the link is now %v (%v)", fi.Mode(), err)
	}
	if diff := cmp.Diff([]string{"passwd", "topo.xml"}, names(t, dir)); diff != "" {
		t.Errorf("directory (-want +got):\n%s", diff)
	}
}

// TestWriteFIFO reproduces #21's defect 11 for fix --persist: f0912a0 opened the
// drop-in with os.Root.WriteFile, which blocks on a FIFO until a reader comes.
func TestWriteFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "etc/default/grub.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "etc/default/grub.d/60-p2pcheck-acs.cfg")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	err = atomicfile.WriteIn(r, "etc/default/grub.d/60-p2pcheck-acs.cfg", atomicfile.Options{Force: true}, writeString("x"))
	if !errors.Is(err, atomicfile.ErrNotRegular) {
		t.Errorf("err = %v, want ErrNotRegular", err)
	}
}

// TestWriteInConfined: a directory link that leads out of the root is not
// followed.
func TestWriteInConfined(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	if err := os.Symlink(out, filepath.Join(dir, "etc")); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := atomicfile.WriteIn(r, "etc/x.cfg", atomicfile.Options{}, writeString("x")); err == nil {
		t.Error("wrote through a link out of the root")
	}
	if diff := cmp.Diff([]string{}, names(t, out)); diff != "" {
		t.Errorf("outside directory (-want +got):\n%s", diff)
	}
}

// TestWriteErrors: a write that fails leaves the old file and no temporary
// file; without Force an existing file is ErrExists.
func TestWriteErrors(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "out")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := atomicfile.Write(target, atomicfile.Options{Force: true}, func(f *os.File) error {
		f.WriteString("partial")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("err %v, want boom", err)
	}
	if err := atomicfile.Write(target, atomicfile.Options{}, writeString("new")); !errors.Is(err, atomicfile.ErrExists) {
		t.Errorf("without Force: %v, want ErrExists", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "old" {
		t.Errorf("target holds %q, want old", b)
	}
	if diff := cmp.Diff([]string{"out"}, names(t, dir)); diff != "" {
		t.Errorf("directory (-want +got):\n%s", diff)
	}
	if err := atomicfile.Write(target, atomicfile.Options{Force: true}, writeString("new")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("target mode %v (%v), want 0644", fi.Mode(), err)
	}
}

// TestWriteFullDisk reproduces #21's defect 10's last part: on a full disk
// f0912a0's --topo-xml left a 0-byte (or partial) file. Write leaves the old file
// and nothing else. It needs a small tmpfs, which only root can mount.
func TestWriteFullDisk(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("mount a 64 KiB tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, 0) })
	target := filepath.Join(dir, "topo.xml")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 1<<20)
	err := atomicfile.Write(target, atomicfile.Options{Force: true}, func(f *os.File) error { _, err := f.Write(big); return err })
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("err = %v, want ENOSPC", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "old" {
		t.Errorf("target holds %d bytes, want the old file", len(b))
	}
	if diff := cmp.Diff([]string{"topo.xml"}, names(t, dir)); diff != "" {
		t.Errorf("directory (-want +got):\n%s", diff)
	}
}
