package hostfs

import "golang.org/x/sys/unix"

// isSysfs reports whether dir is a mounted sysfs (statfs magic SYSFS_MAGIC,
// include/uapi/linux/magic.h), where every config-space register read is a
// configuration cycle, rather than a copy of one on an ordinary file system.
func isSysfs(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.SYSFS_MAGIC
}

// onSysfs reports whether the open directory fd is on a mounted sysfs.
func onSysfs(fd int) bool {
	var st unix.Statfs_t
	return unix.Fstatfs(fd, &st) == nil && st.Type == unix.SYSFS_MAGIC
}
