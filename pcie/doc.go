// Package pcie models a machine's PCI Express hierarchy: typed addresses, decoded
// configuration space, devices and the tree they form.
//
// The package is pure: it does no I/O. Package sysfs reads a root (a live machine or a
// snapshot) into [Record] values, and [NewTopology] turns those into a [Topology].
//
// # Configuration space
//
// [ParseConfig] decodes the bytes of a function's sysfs config file. How much of it
// a process may read depends on its privileges (drivers/pci/pci-sysfs.c
// pci_read_config): 64 bytes without CAP_SYS_ADMIN, 256 or 4096 with it. Whatever
// needs bytes that were not read is reported as unknown ([Config.CapsKnown],
// [Config.ExtCapsKnown], [Device.PortType], [Device.ACS]), never as absent.
//
// # Tree
//
// [NewTopology] links functions through their sysfs paths, the way the kernel links
// them through dev->bus->self, so that [Device.Upstream] and [Device.Ancestors]
// follow pci_upstream_bridge() (include/linux/pci.h), and [CommonUpstream] stops
// where calc_map_type_and_dist() (drivers/pci/p2pdma.c) does. Switches are grouped
// from port types, or from the tree's shape when port types are unknown. A bad or
// missing record degrades only the functions it concerns; the problems are listed
// in [Topology.Errors].
//
// Names (vendor, device, class) are not part of this package: internal/pciids fills
// them from the host's pci.ids.
package pcie
