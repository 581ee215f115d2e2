package hostfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// TestSysCallsRawMatchesGo: every metadata call gives the same answer, error
// included, whether made raw or as a Go system call, on each kind of entry.
func TestSysCallsRawMatchesGo(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "file"), []byte("0x10de\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../devices/x", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	names := []string{"file", "link", "dir", "fifo", "missing", "bad\x00name", strings.Repeat("n", cNameLen-1), strings.Repeat("n", cNameLen)}
	run := func(s sysCalls) []string {
		dirfd, err := s.openat(unix.AT_FDCWD, dir, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			t.Fatal(err)
		}
		defer s.close(dirfd)
		var got []string
		note := func(what string, v any, err error) {
			if err != nil {
				got = append(got, what+": "+errName(err))
				return
			}
			got = append(got, fmt.Sprintf("%s: %v", what, v))
		}
		for _, name := range names {
			fd, err := s.openat(dirfd, name, unix.O_RDONLY|unix.O_NONBLOCK)
			if err == nil {
				var st unix.Stat_t
				err = s.fstat(fd, &st)
				note("fstat "+name, [2]any{st.Mode, st.Size}, err)
				if err := s.close(fd); err != nil {
					t.Errorf("close %s: %v", name, err)
				}
			}
			note("openat "+name, nil, err)
			how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_XDEV}
			fd, err = s.openat2(dirfd, name, &how)
			if err == nil {
				s.close(fd)
			}
			note("openat2 "+name, nil, err)
			var st unix.Stat_t
			err = s.fstatat(dirfd, name, &st)
			note("fstatat "+name, [2]any{st.Mode, st.Size}, err)
			buf := make([]byte, 64)
			n, err := s.readlinkat(dirfd, name, buf)
			note("readlinkat "+name, string(buf[:max(n, 0)]), err)
		}
		buf := make([]byte, 4096)
		var listed []string
		for {
			n, err := s.getdents(dirfd, buf)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			_, _, listed = unix.ParseDirent(buf[:n], -1, listed)
		}
		slices.Sort(listed)
		got = append(got, listed...)
		_, err = s.getdents(-1, buf)
		note("getdents -1", nil, err)
		note("close -1", nil, s.close(-1))
		return got
	}
	want := run(sysCalls{})
	if diff := cmp.Diff(want, run(sysCalls{raw: true})); diff != "" {
		t.Errorf("raw calls differ from Go's (-go +raw):\n%s", diff)
	}
	if !slices.Contains(want, "readlinkat link: ../../devices/x") || !slices.Contains(want, "openat link: "+errName(unix.ELOOP)) {
		t.Errorf("the calls did not see the link as one: %q", want)
	}
}

// errName names an errno, or says what else err is.
func errName(err error) string {
	var e unix.Errno
	if errors.As(err, &e) {
		return unix.ErrnoName(e)
	}
	return "not an errno: " + err.Error()
}

// TestQuickFS: the file systems whose metadata calls are made raw, and some that
// must never be.
func TestQuickFS(t *testing.T) {
	for _, tc := range []struct {
		name  string
		magic int64
		want  bool
	}{
		{"sysfs", unix.SYSFS_MAGIC, true},
		{"tmpfs", unix.TMPFS_MAGIC, true},
		{"ext4", unix.EXT4_SUPER_MAGIC, true},
		{"xfs", unix.XFS_SUPER_MAGIC, true},
		{"btrfs", unix.BTRFS_SUPER_MAGIC, true},
		{"procfs", unix.PROC_SUPER_MAGIC, false},
		{"nfs", unix.NFS_SUPER_MAGIC, false},
		{"fuse", unix.FUSE_SUPER_MAGIC, false},
		{"overlayfs", unix.OVERLAYFS_SUPER_MAGIC, false},
		{"cifs", unix.CIFS_SUPER_MAGIC, false},
		{"9p", unix.V9FS_MAGIC, false},
		{"fstatfs failed", 0, false},
	} {
		if got := quickFS(tc.magic); got != tc.want {
			t.Errorf("quickFS(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
