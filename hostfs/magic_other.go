//go:build !linux

package hostfs

// isSysfs reports false: sysfs exists only on Linux.
func isSysfs(string) bool { return false }
