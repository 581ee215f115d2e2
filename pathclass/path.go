package pathclass

import (
	"fmt"

	"github.com/p2pkit/p2pkit/pcie"
)

// maxDepth bounds the walk up the tree; a PCI hierarchy has at most 256 buses.
const maxDepth = 256

// NVSMI returns the class nvidia-smi topo -m shows for devices a and b (NVML's
// nvmlDeviceGetTopologyCommonAncestor level, see NVMLLevel). nvlinks is the number of
// active NVLinks joining the two GPUs (from NVML); when positive the class is NV.
//
// nvidia-smi is closed source; the rule here is built from its legend and NVML's
// level definitions, with switches found as NCCL finds them (see NCCL): below one
// switch is PIX, through several switches is PXB, through the root complex of one
// host bridge (root ports count as part of it) is PHB, across host bridges of one
// NUMA node is NODE, and across NUMA nodes is SYS. Broadcom PEX switches are not
// folded as NCCL folds them.
func NVSMI(a, b *pcie.Device, nvlinks int) Result {
	switch {
	case a == nil || b == nil:
		return Result{Note: "device missing"}
	case a == b:
		return Result{Class: X}
	case nvlinks > 0:
		return Result{Class: NV, NVLinks: nvlinks}
	case a.HostBridge == nil || b.HostBridge == nil:
		return Result{Note: "host bridge not known"}
	case a.HostBridge != b.HostBridge:
		same, note := sameNUMA(a, b)
		if same {
			return Result{Class: NODE, Note: note}
		}
		return Result{Class: SYS, Note: note}
	}
	ca, _ := ncclChain(a, false)
	cb, _ := ncclChain(b, false)
	if c, ok := switchClass(a, b, ca, cb); ok {
		return Result{Class: c}
	}
	return Result{Class: PHB}
}

// NCCL returns the path type NCCL gives devices a and b over PCIe (ncclTopoSetPaths
// in src/graph/paths.cc, on the tree ncclTopoGetXmlFromSys in src/graph/xml.cc builds
// from sysfs): PIX, PXB, PHB or SYS, or X for a device with itself (NCCL's LOC).
//
// NCCL's tree keeps one node per switch, its upstream port: walking up from a device,
// its parent is the function two levels up in the sysfs path, or the CPU (NUMA node)
// once the walk meets the pciDDDD:BB host bridge element. So root ports drop out and
// every host bridge of one NUMA node hangs off one CPU node: below one switch is PIX,
// through a switch-to-switch hop PXB, through a CPU node PHB, between CPU nodes SYS.
// Broadcom PEX Gen4 and Gen5 switches that show as two levels are folded into one
// first (ncclTopoFlattenBcmSwitches in src/graph/topo.cc). NVLink, C2C, PXN and P2C
// routes, and Broadcom virtual-switch links (/sys/kernel/pci_switch_link), are not
// modelled.
func NCCL(a, b *pcie.Device) Result {
	switch {
	case a == nil || b == nil:
		return Result{Note: "device missing"}
	case a == b:
		return Result{Class: X}
	}
	ca, ta := ncclChain(a, true)
	cb, tb := ncclChain(b, true)
	if c, ok := switchClass(a, b, ca, cb); ok {
		return Result{Class: c}
	}
	same, note := sameNUMA(ta, tb)
	if same {
		return Result{Class: PHB, Note: note}
	}
	return Result{Class: SYS, Note: note}
}

// switchClass finds the nearest node a and b share in NCCL's tree, a and b included,
// and classes the path through it: PIX when no hop joins two switch nodes, else PXB.
// ok is false when they share none (the path goes through the CPU).
func switchClass(a, b *pcie.Device, ca, cb []*pcie.Device) (Class, bool) {
	at := func(d *pcie.Device, c []*pcie.Device, i int) *pcie.Device {
		if i == 0 {
			return d
		}
		return c[i-1]
	}
	for ia := 0; ia <= len(ca); ia++ {
		x := at(a, ca, ia)
		for ib := 0; ib <= len(cb); ib++ {
			if x != at(b, cb, ib) {
				continue
			}
			// The path has ia+ib hops; the hops touching a or b are device-to-switch
			// links (PIX), any other joins two switch nodes (PXB).
			if ia+ib >= 3 {
				return PXB, true
			}
			return PIX, true
		}
	}
	return Unknown, false
}

// ncclChain returns the nodes above d in NCCL's tree, nearest first, and the node
// that hangs off the CPU (the last of them, or d). NCCL's sysfs walk
// (ncclTopoGetXmlFromSys) skips one level each step and stops at the first path
// element that is not a 12-character BDF, so an Intel VMD domain (5 hex digits)
// ends the walk too. With flatten, Broadcom PEX sub-switches merged into their parent
// by ncclTopoFlattenBcmSwitches are left out.
func ncclChain(d *pcie.Device, flatten bool) (chain []*pcie.Device, top *pcie.Device) {
	top = d
	for range maxDepth {
		p1 := top.Upstream()
		if p1 == nil || !ncclBDF(p1) {
			break
		}
		p2 := p1.Upstream()
		if p2 == nil || !ncclBDF(p2) {
			break
		}
		chain = append(chain, p2)
		top = p2
	}
	if !flatten {
		return chain, top
	}
	// NCCL visits switches parents first: a top switch swallows the matching
	// sub-switches right below it and is then marked so that it swallows no more; a
	// swallowed switch's children move up to the top switch.
	absorbed := make([]bool, len(chain))
	for i := len(chain) - 1; i >= 0; i-- {
		if i == len(chain)-1 || absorbed[i+1] {
			continue
		}
		if g := bcmGen(chain[i], 1); g != 0 && bcmGen(chain[i+1], 0) == g {
			absorbed[i] = true
		}
	}
	kept := chain[:0:0]
	for i, n := range chain {
		if !absorbed[i] {
			kept = append(kept, n)
		}
	}
	return kept, top
}

// ncclBDF mirrors checkBDFFormat in NCCL's src/graph/xml.cc: a path element is a PCI
// function only in the 12-character form DDDD:BB:DD.F.
func ncclBDF(d *pcie.Device) bool { return d.Address.Domain <= 0xffff }

// bcmGen mirrors getBcmGen in NCCL's src/graph/topo.cc: 4 or 5 when the switch's
// vendor, device, subsystem vendor and subsystem device (NCCL's 64-bit id, low 12
// bits masked) mark a Broadcom PEX Gen4 or Gen5 switch at the given level of its
// two-level presentation (0 top, 1 sub-switch), else 0. Gen4 looks the same at both
// levels.
func bcmGen(d *pcie.Device, level int) int {
	id := uint64(d.Vendor)<<48 | uint64(d.Device)<<32 | uint64(d.SubVendor)<<16 | uint64(d.SubDevice)
	id &= 0xfffffffffffff000
	switch {
	case id == 0x1000c0101000a000:
		return 4
	case id == 0x1000c03010000000|uint64(level)*0x1000:
		return 5
	}
	return 0
}

// sameNUMA reports whether a and b are on one NUMA node by their numa_node
// attributes. A node of -1 (or none) on both is taken as one node, as NCCL's CPU
// node keyed by numaid "-1" does; on one side only, as different nodes. note says
// so whenever a node was unknown.
func sameNUMA(a, b *pcie.Device) (same bool, note string) {
	na, okA := numaOf(a)
	nb, okB := numaOf(b)
	switch {
	case okA && okB:
		return na == nb, ""
	case !okA && !okB:
		return true, fmt.Sprintf("numa_node of %s and %s is unknown (-1); taken as one NUMA node", a.Address, b.Address)
	case !okA:
		return false, fmt.Sprintf("numa_node of %s is unknown (-1); taken as a different NUMA node from %d", a.Address, nb)
	}
	return false, fmt.Sprintf("numa_node of %s is unknown (-1); taken as a different NUMA node from %d", b.Address, na)
}

func numaOf(d *pcie.Device) (int, bool) {
	if d.NUMANode == nil || *d.NUMANode < 0 {
		return -1, false
	}
	return *d.NUMANode, true
}

// NCCLGDRByDefault reports whether NCCL (2.29 and later; ncclTopoCheckGdr in
// src/graph/paths.cc) with NCCL_NET_GDR_LEVEL unset enables GPUDirect RDMA between a
// GPU and a NIC whose NCCL path type is c: only at PIX or PXB (the default cut-off
// PATH_PXB). On C2C systems NCCL also allows P2C, which is not modelled. Both the GPU
// and the NIC plugin must support GDR besides.
func NCCLGDRByDefault(c Class) bool { return c == PIX || c == PXB }

// ncclP2PByDefault reports whether NCCL (2.23 and later; ncclTopoCheckP2p in
// src/graph/paths.cc) with NCCL_P2P_LEVEL and NCCL_P2P_DISABLE unset uses P2P between
// two GPUs whose NCCL path type is c: up to PXB, or up to SYS when the CPU is x86 AMD
// ("AuthenticAMD") and the node has at most two GPUs. NVLink paths always qualify.
// NVML's P2P status and CUDA's peer-access check come on top. Before 2.23 the default
// was SYS except on Intel, ARM and Zhaoxin CPUs (PXB).
func ncclP2PByDefault(c Class, cpuVendor string, gpus int) bool {
	limit := PXB
	if cpuVendor == "AuthenticAMD" && gpus <= 2 {
		limit = SYS
	}
	return c != Unknown && c <= limit
}
