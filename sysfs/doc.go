// Package sysfs reads what p2pkit needs from /sys beneath a [hostfs.Root]: the PCI
// functions under /sys/bus/pci/devices with their attributes and config space, the
// IOMMU groups (/sys/kernel/iommu_groups) and units (/sys/class/iommu), and the
// peer-memory clients of /sys/kernel/mm/memory_peers. Package procfs reads /proc
// beneath the same root, and package snapshot loads and writes roots held in memory.
//
// An [FS] is made with [New] from a root: [hostfs.Open] of a directory that stands
// for "/", or a snapshot. Every reader method takes the same code path on a directory and on
// a snapshot. A sysfs attribute is read with one bounded read; reading is split from
// parsing: methods of FS read, unexported parseX functions parse bytes and are tested
// and fuzzed on their own.
//
// See https://docs.kernel.org/PCI/sysfs-pci.html and
// Documentation/ABI/testing/sysfs-bus-pci in the kernel tree for the attributes.
package sysfs
