// Package hostfs is the root that packages sysfs and procfs read beneath: a
// directory standing for "/" (the live "/" or an unpacked capture) or a tree held in
// memory (a snapshot, see package snapshot). Both read through the same [Root]
// methods, so a snapshot and a live machine go through exactly the same code, as
// prometheus/procfs's internal/fs root serves its procfs.FS and sysfs.FS.
//
// Symbolic links are resolved inside the root, never outside it: a link that leads out
// of the root is an error and is not followed. Nothing is sized from a stat, because
// sysfs and procfs pseudo-files report sizes that mean nothing: a sysfs attribute is
// read with one bounded read, a /proc file to its end within a bound. Only regular
// files are ever opened: a device node, FIFO or socket where a file is expected is
// refused before it is opened. Every read is bounded by a [Budget].
package hostfs
