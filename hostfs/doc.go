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
// refused before it is opened. On a mounted sysfs, which holds none of them, a file
// is opened without that look, never across a mount (openat2 RESOLVE_NO_XDEV). Every
// read is bounded by a [Budget].
//
// It is also the one reader of every other file p2pcheck reads. Below a root, a file
// of a known [Kind] (/etc/nccl.conf, limits.conf, a libnccl.so) is read with
// [Root.ReadKind] or [Root.OpenKind], within the kind's limit, which the error for a
// longer file names. A file a user names (--config, --pci-ids, --topo-file) has the
// host's "/" for root and is read with [ReadNamed] or [OpenNamed], its links
// followed as the kernel follows them; a file a job names, for the job, with
// [ReadAs], only if the job's own credentials could read it. Only regular files are
// read, refused without blocking otherwise, and all reads of one run count on one
// [Meter].
package hostfs
