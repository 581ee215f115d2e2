package hostfs_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/roottest"
)

var confKind = hostfs.Kind{Name: "test configuration file", Limit: 16}

// within fails t when f does not return within a few seconds: a read that blocks on
// a FIFO would hang the test forever.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: still blocked after 10 s", what)
	}
}

// hostileDir writes the files a hostile --root tree holds where p2pcheck expects
// configuration files: a FIFO, a character device (where mknod is allowed), a sparse
// file of a gigabyte and a link out of the root. It returns the root and a file
// outside it.
func hostileDir(t *testing.T) (root, outside string) {
	t.Helper()
	root = t.TempDir()
	outside = filepath.Join(t.TempDir(), "secret.conf")
	roottest.WriteTree(t, root, []entry{
		file("etc/ok.conf", "NCCL_A=1\n"),
		file("etc/long.conf", strings.Repeat("x", 17)),
		symlink("etc/out.conf", outside),
		symlink("etc/up.conf", "../../"+filepath.Base(filepath.Dir(outside))+"/secret.conf"),
		directory("etc/d"),
	})
	if err := os.WriteFile(outside, []byte("NCCL_SECRET=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "etc/fifo.conf"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mknod(filepath.Join(root, "etc/zero.conf"), syscall.S_IFCHR|0o666, 1<<8|5); err != nil {
		// Not root, or a user namespace: a link to /dev/zero is refused for leaving
		// the root before its type matters, so test the type on a named file instead.
		t.Logf("mknod: %v (the device case runs on named files only)", err)
	}
	f, err := os.Create(filepath.Join(root, "etc/sparse.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return root, outside
}

// TestReadKind reproduces #21's defects 5 and 8 (f0912a0 read the files outside
// sysfs with os.Root.ReadFile: a FIFO hung, /dev/zero or a sparse file ran it out of
// memory) and checks each refusal.
func TestReadKind(t *testing.T) {
	dir, _ := hostileDir(t)
	r, err := hostfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tests := []struct {
		name    string
		want    string
		wantErr string
		is      error
	}{
		{"etc/ok.conf", "NCCL_A=1\n", "", nil},
		{"etc/long.conf", "", "16 bytes (the limit for a test configuration file)", hostfs.ErrTooLarge},
		{"etc/sparse.conf", "", "the limit for a test configuration file", hostfs.ErrTooLarge},
		{"etc/fifo.conf", "", "named pipe", hostfs.ErrNotFile},
		{"etc/out.conf", "", "", nil},
		{"etc/up.conf", "", "", nil},
		{"etc/d", "", "directory", nil},
		{"etc/none.conf", "", "", fs.ErrNotExist},
	}
	if _, err := os.Lstat(filepath.Join(dir, "etc/zero.conf")); err == nil {
		tests = append(tests, struct {
			name, want, wantErr string
			is                  error
		}{"etc/zero.conf", "", "character device", hostfs.ErrNotFile})
	}
	for _, tt := range tests {
		var b []byte
		var err error
		within(t, tt.name, func() { b, err = r.ReadKind(tt.name, confKind) })
		if tt.want != "" {
			if err != nil || string(b) != tt.want {
				t.Errorf("ReadKind(%s) = %q, %v; want %q", tt.name, b, err, tt.want)
			}
			continue
		}
		if err == nil {
			t.Errorf("ReadKind(%s) = %q, want an error", tt.name, b)
			continue
		}
		if !strings.Contains(err.Error(), tt.wantErr) || tt.is != nil && !errors.Is(err, tt.is) {
			t.Errorf("ReadKind(%s): err = %v, want %q (%v)", tt.name, err, tt.wantErr, tt.is)
		}
		if !strings.HasPrefix(err.Error(), "hostfs: read /"+tt.name) {
			t.Errorf("ReadKind(%s): err = %v, want it to name /%s", tt.name, err, tt.name)
		}
	}
}

// TestMeter checks that one Meter bounds the reads of every root and named file of a
// run together, each well within its own limit.
func TestMeter(t *testing.T) {
	dir := t.TempDir()
	roottest.WriteTree(t, dir, []entry{file("etc/a", "0123456789"), file("sys/b", "0123456789")})
	m := hostfs.NewMeter(25)
	r1, err := hostfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	r1 = r1.WithMeter(m)
	r2, err := hostfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	r2 = r2.WithMeter(m)
	if _, err := r1.ReadKind("etc/a", confKind); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := r2.Read("sys/b", buf, false); err != nil {
		t.Fatal(err)
	}
	_, err = hostfs.ReadNamed(m, filepath.Join(dir, "etc/a"), confKind)
	var be *hostfs.BudgetError
	if !errors.As(err, &be) || be.Limit != "RunBytes" {
		t.Errorf("third read: err = %v, want over Budget.RunBytes", err)
	}
	if m.Used() != 30 {
		t.Errorf("Used = %d, want 30", m.Used())
	}
	// A part of the run has a smaller limit of its own and counts on the run's.
	run := hostfs.NewMeter(100)
	part := run.Sub(15)
	if _, err := hostfs.ReadNamed(part, filepath.Join(dir, "etc/a"), confKind); err != nil {
		t.Fatal(err)
	}
	if _, err := hostfs.ReadNamed(part, filepath.Join(dir, "etc/a"), confKind); !errors.Is(err, hostfs.ErrBudget) {
		t.Errorf("over the part's limit: err = %v", err)
	}
	if run.Used() != 10 || part.Used() != 20 {
		t.Errorf("run used %d, part %d; want 10 and 20 (the refused read is not the run's)", run.Used(), part.Used())
	}
}

// TestOpenKind reads a file in pieces up to its kind's limit.
func TestOpenKind(t *testing.T) {
	d, m := openBoth(t, []entry{file("usr/lib/lib.so", strings.Repeat("a", 20)), file("usr/lib/small.so", "abc")})
	for _, r := range []hostfs.Root{d.Root, m} {
		f, err := r.OpenKind("usr/lib/small.so", confKind)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(f)
		if err != nil || string(b) != "abc" || f.Size() != 3 {
			t.Errorf("small: %q, %v, size %d", b, err, f.Size())
		}
		f.Close()
		f.Close()
		f, err = r.OpenKind("usr/lib/lib.so", confKind)
		if err != nil {
			t.Fatal(err)
		}
		b, err = io.ReadAll(f)
		if !errors.Is(err, hostfs.ErrTooLarge) || len(b) != 16 {
			t.Errorf("large: %d bytes, %v; want 16 and ErrTooLarge", len(b), err)
		}
		f.Close()
	}
}

func TestGlobAndFileID(t *testing.T) {
	entries := []entry{
		file("usr/lib/python3.11/site/nccl/libnccl.so.2", "x"),
		file("usr/lib/python3.12/site/nccl/libnccl.so.2", "y"),
		symlink("usr/lib/python3.12/site/nccl/libnccl.so", "libnccl.so.2"),
		file("usr/lib/python2/site/nccl/libnccl.so", "z"),
		symlink("usr/lib/python3.13", "/etc"),
	}
	d, m := openBoth(t, entries)
	for i, r := range []hostfs.Root{d.Root, m} {
		got, err := r.Glob("usr/lib/python3*/site/nccl/libnccl.so*", 100)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{
			"usr/lib/python3.11/site/nccl/libnccl.so.2",
			"usr/lib/python3.12/site/nccl/libnccl.so",
			"usr/lib/python3.12/site/nccl/libnccl.so.2",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("root %d: Glob (-want +got):\n%s", i, diff)
		}
		if _, err := r.Glob("usr/lib/python3*/site/nccl/libnccl.so*", 2); !errors.Is(err, hostfs.ErrBudget) {
			t.Errorf("root %d: Glob over its max: err = %v", i, err)
		}
		a, err1 := r.FileID(want[1])
		b, err2 := r.FileID(want[2])
		c, err3 := r.FileID(want[0])
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatal(err)
		}
		if a != b || a == c {
			t.Errorf("root %d: FileID link %v, target %v, other %v", i, a, b, c)
		}
	}
}

// TestReadNamed reproduces #21's defect 11 (a user-named FIFO hung --config,
// --pci-ids and a live NCCL_CONF_FILE) and checks that a named file is read through
// its links but never when it is not a regular file.
func TestReadNamed(t *testing.T) {
	dir, outside := hostileDir(t)
	link := filepath.Join(dir, "link.conf")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	if b, err := hostfs.ReadNamed(nil, link, confKind); err != nil || string(b) != "NCCL_SECRET=1\n" {
		t.Errorf("through a link: %q, %v", b, err)
	}
	for _, tt := range []struct {
		path string
		is   error
	}{
		{filepath.Join(dir, "etc/fifo.conf"), hostfs.ErrNotFile},
		{"/dev/zero", hostfs.ErrNotFile},
		{filepath.Join(dir, "etc/sparse.conf"), hostfs.ErrTooLarge},
		{filepath.Join(dir, "etc/none"), fs.ErrNotExist},
	} {
		var err error
		within(t, tt.path, func() { _, err = hostfs.ReadNamed(nil, tt.path, confKind) })
		if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.path) {
			t.Errorf("ReadNamed(%s): err = %v, want %v naming the path", tt.path, err, tt.is)
		}
	}
}

// TestReadAs reproduces #21's defect 6 (under --pid, a job of user nobody had
// p2pcheck print a root-only file's NCCL_* lines): the file is read only when the
// job's own credentials could read it.
func TestReadAs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make files another user owns")
	}
	// Not t.TempDir: its parent is searchable by root alone.
	dir, err := os.MkdirTemp("", "readas")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, perm fs.FileMode, uid int) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("NCCL_X=1\n"), perm); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, perm); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
		return p
	}
	world := write("pub/world.conf", 0o644, 0)
	rootOnly := write("pub/root.conf", 0o600, 0)
	own := write("pub/own.conf", 0o600, 65534)
	hidden := write("priv/hidden.conf", 0o644, 0)
	if err := os.Chmod(filepath.Join(dir, "priv"), 0o700); err != nil {
		t.Fatal(err)
	}
	toRootOnly := filepath.Join(dir, "pub/to-root.conf")
	toHidden := filepath.Join(dir, "pub/to-hidden.conf")
	if err := errors.Join(os.Symlink(rootOnly, toRootOnly), os.Symlink(hidden, toHidden)); err != nil {
		t.Fatal(err)
	}
	nobody := hostfs.Cred{UID: 65534, GID: 65534}
	member := hostfs.Cred{UID: 1000, GID: 1000, Groups: []uint32{0}}
	tests := []struct {
		path string
		c    hostfs.Cred
		ok   bool
	}{
		{world, nobody, true},
		{own, nobody, true},
		{rootOnly, nobody, false},
		{toRootOnly, nobody, false},
		{hidden, nobody, false},
		{toHidden, nobody, false},
		{rootOnly, hostfs.Cred{UID: 65534, Bypass: true}, true},
		{hidden, hostfs.Cred{UID: 0}, true},
		{own, member, false},
		{"relative.conf", hostfs.Cred{Bypass: true}, false},
		// Below a directory it may not search, a missing file is refused as one
		// that exists: its existence is not told either.
		{filepath.Join(dir, "priv/none.conf"), nobody, false},
	}
	for _, tt := range tests {
		b, err := hostfs.ReadAs(nil, tt.path, confKind, tt.c)
		if tt.ok {
			if err != nil || string(b) != "NCCL_X=1\n" {
				t.Errorf("ReadAs(%s, %+v) = %q, %v; want the file", tt.path, tt.c, b, err)
			}
			continue
		}
		if err == nil || b != nil {
			t.Errorf("ReadAs(%s, %+v) = %q, want an error", tt.path, tt.c, b)
		}
		if tt.path != "relative.conf" && (!errors.Is(err, fs.ErrPermission) || !errors.Is(err, hostfs.ErrNotPermitted)) {
			t.Errorf("ReadAs(%s, %+v): err = %v, want ErrNotPermitted", tt.path, tt.c, err)
		}
	}
}
