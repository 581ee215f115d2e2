//go:build !linux

package sysfs

// isSysfs reports false: sysfs exists only on Linux.
func isSysfs(string) bool { return false }
