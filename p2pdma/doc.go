// Package p2pdma predicts the Linux kernel's PCI peer-to-peer DMA verdict for a pair
// of PCI functions: the map type and distance that calc_map_type_and_dist() in
// drivers/pci/p2pdma.c computes, with the reason in the kernel's own terms and, when
// ACS redirection is what stands in the way, the exact fix.
//
// The package is pure: it works on a [pcie.Topology] and a [Platform] (CPU vendor and
// family from /proc/cpuinfo, kernel version from /proc/version) that the caller read.
//
// # What is modelled
//
// The decision code is the same from Linux 5.9 through the newest PCI tree examined
// (after 7.3-rc1); only the host-bridge whitelist grows, so the whitelist is versioned
// (each entry names the release that added it, [WhitelistEntry]). Kernels before 5.9 matched AMD host bridges by device ID rather
// than by CPU family, and before 5.5 a redirect refused the pair outright; for them
// only the plain common-bridge verdict (bus-addr) is given and everything that would
// cross a host bridge is [Unknown]. Kernels before 4.20 have no P2PDMA at all.
//
// Facts that cannot be read (ACS Control and the PCI Express port type need config
// space past 64 bytes, so root) are never guessed: a verdict whose map type depends on
// them is [Unknown] and says why.
//
// testdata/ holds QEMU guests of the P2PDMA test kernel (Linux 6.12 printing its own
// verdict for every pair); the tests check that this package gives the same map type
// and distance for every ordered pair.
//
// # Performance
//
// For many pairs build a [Calculator] once: it precomputes each function's upstream
// chain, ACS redirect state and host bridge, and each host bridge's whitelist state,
// and shares the redirect part of verdicts between pairs. Every ordered pair of a
// thousand functions takes well under a second. [Calc] is a convenience for one pair.
package p2pdma
