package hostfs

import (
	"math/bits"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A Go system call tells the scheduler it is entering the kernel, so that sysmon
// can hand the goroutine's P to another thread if the call blocks; leaving it, the
// thread must take a P back. For the calls PCIRecords makes by the ten thousand
// that is the largest cost outside the kernel, and with two threads in calls on a
// two-CPU machine sysmon wakes every 20 µs to retake their Ps: reading the
// 1,028-function tree, `topo` made 5,400 nanosleep and 700 futex calls of its own.
//
// So an fdTree's metadata calls (open, stat, readlink, getdents, close) are made with
// RawSyscall where its file system answers them from memory or a local disk, never
// from another machine or process (quickFS): they hold the P for microseconds, or
// for a disk read where the copy is not cached. Reads and preads are raw there too,
// except on sysfs: a sysfs read runs the attribute's show routine, and a config read
// is one configuration cycle per register, which a device in a bad state can
// stretch to a second (PCIe CRS retries), so it stays a Go system call. A name
// another file system is mounted over is opened the kernfs way with RESOLVE_NO_XDEV,
// never entered; a stat or readlink of one on a copy does enter it, and holds the P
// while that file system answers.

// quickFS reports whether the file system of statfs type magic answers metadata
// calls without waiting on another machine or process: sysfs (kernfs, in memory;
// its open routines allocate and return, fs/kernfs/file.c kernfs_fop_open), tmpfs,
// ramfs and the local disk file systems copies are unpacked to (ext2/3/4, XFS,
// Btrfs). procfs is not: opening one of its files calls the driver that made it
// (fs/proc/inode.c proc_reg_open). Magic numbers: include/uapi/linux/magic.h.
func quickFS(magic int64) bool {
	switch magic {
	case unix.SYSFS_MAGIC, unix.TMPFS_MAGIC, unix.RAMFS_MAGIC,
		unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC:
		return true
	}
	return false
}

// sysCalls makes the calls of one directory's file system: the metadata calls raw
// when raw is set (see quickFS), reads raw when rawData is. Every method but close
// retries on EINTR.
type sysCalls struct{ raw, rawData bool }

// newSysCalls is the sysCalls of a file system of statfs type magic.
func newSysCalls(magic int64) sysCalls {
	quick := quickFS(magic)
	return sysCalls{raw: quick, rawData: quick && magic != unix.SYSFS_MAGIC}
}

// openat opens name relative to dirfd, never following a final link.
func (s sysCalls) openat(dirfd int, name string, flags int) (int, error) {
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if !s.raw {
		return retry(func() (int, error) { return unix.Openat(dirfd, name, flags, 0) })
	}
	var b [cNameLen]byte
	p, err := cstring(&b, name)
	if err != nil {
		return -1, err
	}
	return retry(func() (int, error) {
		return result(unix.RawSyscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)), uintptr(flags), 0, 0, 0))
	})
}

// openat2 is openat2(2) of name relative to dirfd.
func (s sysCalls) openat2(dirfd int, name string, how *unix.OpenHow) (int, error) {
	if !s.raw {
		return retry(func() (int, error) { return unix.Openat2(dirfd, name, how) })
	}
	var b [cNameLen]byte
	p, err := cstring(&b, name)
	if err != nil {
		return -1, err
	}
	return retry(func() (int, error) {
		return result(unix.RawSyscall6(unix.SYS_OPENAT2, uintptr(dirfd), uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(how)), unsafe.Sizeof(*how), 0, 0))
	})
}

// fstatat lstats the single element name relative to dirfd.
func (s sysCalls) fstatat(dirfd int, name string, st *unix.Stat_t) error {
	if !s.raw {
		return retryErr(func() error { return unix.Fstatat(dirfd, name, st, unix.AT_SYMLINK_NOFOLLOW) })
	}
	var b [cNameLen]byte
	p, err := cstring(&b, name)
	if err != nil {
		return err
	}
	return retryErr(func() error {
		_, err := result(unix.RawSyscall6(unix.SYS_NEWFSTATAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(st)), unix.AT_SYMLINK_NOFOLLOW, 0, 0))
		return err
	})
}

// fstat stats the open fd.
func (s sysCalls) fstat(fd int, st *unix.Stat_t) error {
	if !s.raw {
		return retryErr(func() error { return unix.Fstat(fd, st) })
	}
	return retryErr(func() error {
		_, err := result(unix.RawSyscall(unix.SYS_FSTAT, uintptr(fd), uintptr(unsafe.Pointer(st)), 0))
		return err
	})
}

// readlinkat reads the link name relative to dirfd into buf.
func (s sysCalls) readlinkat(dirfd int, name string, buf []byte) (int, error) {
	if !s.raw {
		return retry(func() (int, error) { return unix.Readlinkat(dirfd, name, buf) })
	}
	var b [cNameLen]byte
	p, err := cstring(&b, name)
	if err != nil {
		return 0, err
	}
	return retry(func() (int, error) {
		return result(unix.RawSyscall6(unix.SYS_READLINKAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(unsafe.SliceData(buf))), uintptr(len(buf)), 0, 0))
	})
}

// getdents reads directory entries of fd into buf (getdents64(2)).
func (s sysCalls) getdents(fd int, buf []byte) (int, error) {
	if !s.raw {
		return retry(func() (int, error) { return unix.Getdents(fd, buf) })
	}
	return retry(func() (int, error) {
		return result(unix.RawSyscall(unix.SYS_GETDENTS64, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(buf))), uintptr(len(buf))))
	})
}

// read reads from fd into buf (read(2)).
func (s sysCalls) read(fd int, buf []byte) (int, error) {
	if !s.rawData {
		return retry(func() (int, error) { return unix.Read(fd, buf) })
	}
	return retry(func() (int, error) {
		return result(unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(buf))), uintptr(len(buf))))
	})
}

// pread reads from fd at offset off into buf (pread64(2)). It is raw only where
// the offset is one register: 32-bit ABIs split it (x/sys/unix does that).
func (s sysCalls) pread(fd int, buf []byte, off int64) (int, error) {
	if !s.rawData || bits.UintSize != 64 {
		return retry(func() (int, error) { return unix.Pread(fd, buf, off) })
	}
	return retry(func() (int, error) {
		return result(unix.RawSyscall6(unix.SYS_PREAD64, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(buf))), uintptr(len(buf)), uintptr(off), 0, 0))
	})
}

// close closes fd. It is not retried: after EINTR the descriptor is closed
// anyway (close(2)).
func (s sysCalls) close(fd int) error {
	if !s.raw {
		return unix.Close(fd)
	}
	_, err := result(unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0))
	return err
}

// cNameLen is the longest name, its NUL included, cstring copies to the caller's
// stack: NAME_MAX (include/uapi/linux/limits.h) and one. The names an fdTree
// opens are single elements, so none is longer.
const cNameLen = 256

// cstring is name NUL-terminated in buf, or in a new allocation when it is too
// long. A name holding a NUL is EINVAL, as for any Go system call.
func cstring(buf *[cNameLen]byte, name string) (*byte, error) {
	if len(name) >= len(buf) {
		return unix.BytePtrFromString(name)
	}
	if strings.IndexByte(name, 0) >= 0 {
		return nil, unix.EINVAL
	}
	copy(buf[:], name)
	buf[len(name)] = 0
	return &buf[0], nil
}

// result is the return value and error of a raw system call.
func result(r, _ uintptr, errno unix.Errno) (int, error) {
	if errno != 0 {
		return -1, errno
	}
	return int(r), nil
}

// retry calls f until it fails with something other than EINTR.
func retry(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if err != unix.EINTR {
			return n, err
		}
	}
}

// retryErr is retry for a call that returns only an error.
func retryErr(f func() error) error {
	_, err := retry(func() (int, error) { return 0, f() })
	return err
}
