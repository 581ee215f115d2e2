package hostfs

import "golang.org/x/sys/unix"

// isSysfs reports whether dir is a mounted sysfs (statfs magic SYSFS_MAGIC,
// include/uapi/linux/magic.h), where every config-space register read is a
// configuration cycle, rather than a copy of one on an ordinary file system.
func isSysfs(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.SYSFS_MAGIC
}

// fsMagic is the statfs type of the file system the open fd is on, 0 when fstatfs
// fails.
func fsMagic(fd int) int64 {
	var st unix.Statfs_t
	if unix.Fstatfs(fd, &st) != nil {
		return 0
	}
	return st.Type
}
