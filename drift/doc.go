// Package drift compares machines that should be identical: a node against a
// golden snapshot of it, two snapshots, or a fleet of snapshots grouped by their
// fabric signature. It is what `p2pcheck diff` runs.
//
// A machine is first reduced to a [Summary]: the facts that decide what its
// peer-to-peer paths can do, each device named by its place in the tree rather
// than by bus number, and the verdicts drawn from them (the kernel's P2PDMA
// verdict, the path classes and NCCL's transport for every pair of devices of
// interest, and the status of every check of the node report). [Compare] lists
// what differs between two summaries, kind by kind; [Summary.Signature] is a
// stable hash of the same facts, so that nodes with equal signatures have no
// drift between them, which is how [Fleet] groups many nodes while keeping one
// snapshot loaded at a time.
//
// # Places
//
// A device's place is the path from the function on its root bus down to it, as
// the kernel's pci=disable_acs_redir= parameter names devices and as `p2pcheck fix`
// writes them (provision.DeviceSpec; pci_dev_str_match_path() in drivers/pci/pci.c,
// Documentation/admin-guide/kernel-parameters.txt): "0000:15:01.0/0.0/0.0/1.0".
// Only the root bus number appears, and firmware assigns it (ACPI _BBN), so a card
// added elsewhere that renumbers the buses below a root port changes no place: a
// renumbering is not drift. VFs are not devices of their own here; their PF's
// count of them is a fact of the PF.
//
// # What never counts
//
// Serial numbers, GPU UUIDs, host names, timestamps, bus numbers below the root
// bus, IOMMU group numbers (group membership counts), resource addresses, device
// names from pci.ids and the kernel command line beyond the IOMMU and ACS
// parameters are not in a Summary, so they can neither drift nor change a
// signature.
package drift
