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

// TestSysCallsRawMatchesGo: every call gives the same answer, error included,
// whether made raw or as a Go system call, on each kind of entry.
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
				buf := make([]byte, 4)
				n, err := s.read(fd, buf)
				note("read "+name, string(buf[:max(n, 0)]), err)
				n, err = s.read(fd, buf)
				note("read again "+name, string(buf[:max(n, 0)]), err)
				n, err = s.pread(fd, buf, 2)
				note("pread 2 "+name, string(buf[:max(n, 0)]), err)
				n, err = s.pread(fd, buf, 1<<40)
				note("pread past the end "+name, n, err)
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
		_, err = s.read(-1, buf)
		note("read -1", nil, err)
		_, err = s.pread(dirfd, buf, 0)
		note("pread of the directory", nil, err)
		note("close -1", nil, s.close(-1))
		return got
	}
	want := run(sysCalls{})
	if diff := cmp.Diff(want, run(sysCalls{raw: true, rawData: true})); diff != "" {
		t.Errorf("raw calls differ from Go's (-go +raw):\n%s", diff)
	}
	for _, w := range []string{"readlinkat link: ../../devices/x", "openat link: " + errName(unix.ELOOP),
		"read file: 0x10", "read again file: de\n", "pread 2 file: 10de", "pread past the end file: 0",
		"read fifo: ", "pread 2 fifo: " + errName(unix.ESPIPE), "read dir: " + errName(unix.EISDIR), "read -1: " + errName(unix.EBADF)} {
		if !slices.Contains(want, w) {
			t.Errorf("the Go calls did not give %q: %q", w, want)
		}
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

// TestNewSysCalls: the file systems whose metadata calls are made raw, those whose
// reads are raw too (all of them but sysfs, whose reads run device code), and some
// that must never be.
func TestNewSysCalls(t *testing.T) {
	meta, all := sysCalls{raw: true}, sysCalls{raw: true, rawData: true}
	for _, tc := range []struct {
		name  string
		magic int64
		want  sysCalls
	}{
		{"sysfs", unix.SYSFS_MAGIC, meta},
		{"tmpfs", unix.TMPFS_MAGIC, all},
		{"ramfs", unix.RAMFS_MAGIC, all},
		{"ext4", unix.EXT4_SUPER_MAGIC, all},
		{"xfs", unix.XFS_SUPER_MAGIC, all},
		{"btrfs", unix.BTRFS_SUPER_MAGIC, all},
		{"procfs", unix.PROC_SUPER_MAGIC, sysCalls{}},
		{"nfs", unix.NFS_SUPER_MAGIC, sysCalls{}},
		{"fuse", unix.FUSE_SUPER_MAGIC, sysCalls{}},
		{"overlayfs", unix.OVERLAYFS_SUPER_MAGIC, sysCalls{}},
		{"cifs", unix.CIFS_SUPER_MAGIC, sysCalls{}},
		{"9p", unix.V9FS_MAGIC, sysCalls{}},
		{"debugfs", unix.DEBUGFS_MAGIC, sysCalls{}},
		{"fstatfs failed", 0, sysCalls{}},
	} {
		if got := newSysCalls(tc.magic); got != tc.want {
			t.Errorf("newSysCalls(%s) = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
