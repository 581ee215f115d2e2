// Package lspcidiff holds the differential test of p2pcheck's model of the PCI tree
// against pciutils' lspci (https://github.com/pciutils/pciutils): every tree under
// testdata/ and every internal/testtools/fixture machine is read by both, and the function
// set, parents, IDs, names, links, "(downgraded)", ACS Control, memory BARs, NUMA
// node, IOMMU group and driver must agree, except for the differences the test
// lists with their reasons. The package has no non-test code.
package lspcidiff
