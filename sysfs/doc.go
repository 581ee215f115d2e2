// Package sysfs reads what p2pkit needs from a Linux root: the PCI functions under
// /sys/bus/pci/devices, the platform facts under /proc, /sys and /dev, and snapshots of
// both.
//
// An [FS] stands for "/": [NewFS] roots it at a directory (the live "/" or an unpacked
// capture) and [OpenSnapshot] or [ReadSnapshot] load a gzip'd tar written by
// [WriteSnapshot] into memory. Every reader method takes the same code path on both.
//
// Symbolic links are resolved inside the root, never outside it: a link that leads out
// of the root is an error and is not followed. Nothing is sized from a stat, because
// sysfs and procfs pseudo-files report sizes that mean nothing: a sysfs attribute is
// read with one bounded read, a /proc file to its end within a bound. Reading is split
// from parsing: methods of FS read, unexported parseX functions parse bytes and are
// tested and fuzzed on their own.
//
// See https://docs.kernel.org/PCI/sysfs-pci.html and
// Documentation/ABI/testing/sysfs-bus-pci in the kernel tree for the attributes.
package sysfs
