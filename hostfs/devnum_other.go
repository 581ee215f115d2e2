//go:build !linux

package hostfs

import "io/fs"

// deviceNumber reports no device number: p2pkit decodes st_rdev only on Linux.
func deviceNumber(fs.FileInfo) (major, minor uint32, ok bool) { return 0, 0, false }

// fileIDOf is the zero FileID: p2pkit reads inode numbers only on Linux.
func fileIDOf(fs.FileInfo) FileID { return FileID{} }

// owner reports no owner: p2pkit judges permissions only on Linux.
func owner(fs.FileInfo) (uid, gid uint32, ok bool) { return 0, 0, false }
