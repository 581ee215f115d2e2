// Package snapshot holds p2pkit's snapshot format: a gzip'd tar of what p2pkit reads
// from a Linux root, members named sys/..., proc/..., dev/... and boot/... as on the
// live system, links kept as links. [WriteOptions] captures one from a [hostfs.Root];
// [Open] and [Read] load one into a root held in memory, which packages sysfs and
// procfs then read exactly as they read a directory. Archives travel (a bug report,
// a stranger's file), so loading one is bounded by a [hostfs.Budget] and every member
// is checked before it is kept.
package snapshot
