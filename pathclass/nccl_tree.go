package pathclass

import "github.com/p2pkit/p2pkit/pcie"

// NCCLParents returns the PCI functions NCCL's sysfs walk (ncclTopoGetXmlFromSys in
// src/graph/xml.cc) makes the parents of d, nearest first: every second function
// on the way up, ending where the walk meets the host bridge and attaches the last
// one to its CPU (NUMA node). An empty result means d hangs off the CPU itself.
// Broadcom PEX sub-switches are not folded here: NCCL folds them later, in the
// system graph (ncclTopoFlattenBcmSwitches in src/graph/topo.cc).
func NCCLParents(d *pcie.Device) []*pcie.Device {
	chain, _ := ncclChain(d, false)
	return chain
}
