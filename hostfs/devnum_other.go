//go:build !linux

package hostfs

import "io/fs"

// deviceNumber reports no device number: p2pkit decodes st_rdev only on Linux.
func deviceNumber(fs.FileInfo) (major, minor uint32, ok bool) { return 0, 0, false }
