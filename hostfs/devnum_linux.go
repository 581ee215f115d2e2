package hostfs

import (
	"io/fs"
	"syscall"
)

// deviceNumber returns the major and minor number of a device node, decoding st_rdev
// the way glibc's gnu_dev_major and gnu_dev_minor do (the kernel's new_encode_dev in
// include/linux/kdev_t.h: 12 bits of major and 20 bits of minor, split).
func deviceNumber(fi fs.FileInfo) (major, minor uint32, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	major, minor = splitDev(st.Rdev)
	return major, minor, true
}

// splitDev decodes an st_rdev as deviceNumber does.
func splitDev(dev uint64) (major, minor uint32) {
	return uint32((dev>>8)&0xfff | (dev>>32)&^0xfff), uint32(dev&0xff | (dev>>12)&^0xff)
}

// fileIDOf is the device and inode number of fi.
func fileIDOf(fi fs.FileInfo) FileID {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return FileID{}
	}
	return FileID{dev: uint64(st.Dev), ino: st.Ino}
}

// owner is the user and group that own fi.
func owner(fi fs.FileInfo) (uid, gid uint32, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return st.Uid, st.Gid, true
}
