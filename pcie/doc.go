// Package pcie models a machine's PCI Express hierarchy: typed addresses, decoded
// configuration space, devices and the tree they form.
//
// The package is pure: it does no I/O. Package sysfs reads a root (a live machine or a
// snapshot) into [Record] values, and [NewTopology] turns those into a [Topology].
package pcie
