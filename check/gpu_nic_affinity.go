package check

import (
	"fmt"
	"slices"
	"strings"

	"github.com/p2pkit/p2pkit/pathclass"
	"github.com/p2pkit/p2pkit/pcie"
)

// graceC2C reports whether GPU d is a Grace superchip's GPU, joined to its CPU
// by NVLink-C2C: an NVIDIA GPU on an arm64 host that NVML names GH200, GB200 or
// GB300, or whose device ID is one of those parts' (GH200 0x2342 and 0x2348,
// GB200 0x2941).
func (f *Facts) graceC2C(d *pcie.Device) bool {
	if d.Vendor != pcie.VendorNVIDIA || !f.Arm64() {
		return false
	}
	if g := f.nvmlGPU(d.Address); g != nil {
		for _, n := range []string{"GH200", "GB200", "GB300"} {
			if strings.Contains(g.Name, n) {
				return true
			}
		}
	}
	return slices.Contains(graceGPUDevices, d.Device)
}

// graceGPUDevices are the PCI device IDs of Grace superchips' GPUs: GH200 0x2342
// and 0x2348, GB200 0x2941 (pci.ids, NVIDIA 10de).
var graceGPUDevices = []uint16{0x2342, 0x2348, 0x2941}

// checkGPUNICAffinity classifies, for every GPU, the path to its nearest RDMA
// NIC as NCCL does (pathclass.NCCL), with both NUMA nodes, and warns when NCCL
// would not use GPUDirect RDMA for it by default (ncclTopoCheckGdr in NVIDIA/nccl
// src/graph/paths.cc): then NCCL stages RDMA through host memory. NCCL's
// default cut-off is PXB (NCCL_NET_GDR_LEVEL); two routes reach farther NICs:
//
//   - On a Grace superchip (NVLink-C2C between GPU and CPU), NCCL 2.27 and later
//     classes a NIC on the GPU's CPU as P2C and allows GPUDirect RDMA there by
//     default (NCCL_NET_GDR_C2C=1).
//   - PXN: a NIC within PXB of another GPU that is NVLink-connected to this one
//     is reached through that GPU, over NVLink then PCIe (NCCL_PXN_DISABLE=1
//     turns it off); NCCL then judges the other GPU's distance.
func checkGPUNICAffinity(f *Facts) Result {
	r := Result{Refs: []string{docRef("gpu_nic_affinity"), "NVIDIA/nccl src/graph/paths.cc ncclTopoCheckGdr, ncclTopoComputePaths (PXN, P2C)",
		"https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html (NCCL_NET_GDR_LEVEL, NCCL_NET_GDR_C2C, NCCL_PXN_DISABLE)"}}
	gpus, nics := f.GPUs(), f.NICs()
	if len(gpus) == 0 || len(nics) == 0 {
		r.Status, r.Summary = Skip, "needs at least one GPU and one RDMA NIC"
		return r
	}
	r.Status = Pass
	var classes, unknown []string
	near := make([]nearNIC, len(gpus))
	var relays []int // the GPUs with a NIC within NCCL's default reach, PXN's candidates
	for i, g := range gpus {
		near[i].nic, near[i].res = f.nearestNIC(g, nics)
		if pathclass.NCCLGDRByDefault(near[i].res.Class) {
			relays = append(relays, i)
		}
	}
	for i, g := range gpus {
		best, bestRes := near[i].nic, near[i].res
		classes = append(classes, fmt.Sprintf("%s (NUMA %s)->%s (NUMA %s) %s", g.Address, numaString(g), label(best), numaString(best), bestRes))
		if pathclass.NCCLGDRByDefault(bestRes.Class) {
			continue
		}
		subj := g.Address.String()
		if bestRes.Class == pathclass.Unknown {
			unknown = append(unknown, subj)
			r.Findings = append(r.Findings, Finding{Subject: subj, Status: Unknown, Message: "path class unknown: " + bestRes.Note})
			continue
		}
		if bestRes.Class == pathclass.PHB && f.graceC2C(g) {
			r.Findings = append(r.Findings, Finding{Subject: subj, Status: Pass,
				Message: fmt.Sprintf("nearest %s is PHB through the Grace CPU: NCCL 2.27 and later classes it P2C (NVLink-C2C) and uses GPUDirect RDMA by default (NCCL_NET_GDR_C2C=1); older NCCL stages through host memory", label(best))})
			continue
		}
		msg := fmt.Sprintf("nearest %s is %s: farther than PXB, NCCL will not use GPUDirect RDMA by default", label(best), bestRes)
		if gn, nn := numaString(g), numaString(best); gn != nn {
			msg += fmt.Sprintf("; GPU on NUMA node %s, NIC on %s", gn, nn)
		}
		if h, n, nv := f.pxnRelay(g, gpus, near, relays); h != nil {
			switch nv {
			case nvlinkYes:
				r.Findings = append(r.Findings, Finding{Subject: subj, Status: Pass,
					Message: fmt.Sprintf("nearest %s is %s, but NCCL reaches %s through NVLink-connected GPU %s (PXN; NCCL_PXN_DISABLE=1 turns it off)", label(best), bestRes, label(n), h.Address)})
				continue
			case nvlinkUnknown:
				msg += fmt.Sprintf("; if GPU %s is NVLink-connected to it, NCCL reaches %s through it (PXN), but NVLink is unknown without NVML", h.Address, label(n))
			}
		}
		r.Status = worse(r.Status, Warn)
		r.Subjects = append(r.Subjects, subj)
		r.Findings = append(r.Findings, Finding{Subject: subj, Status: Warn, Message: msg})
	}
	r.Observed = strings.Join(classes, "; ")
	r.Expected = "PIX or PXB to at least one NIC per GPU (P2C on Grace with NCCL 2.27+, or a NIC reached by PXN)"
	switch {
	case len(unknown) > 0:
		// Placement decides how fast GPUDirect RDMA is, not whether it works.
		r.Status, r.PerformanceOnly = Unknown, true
		r.Summary = fmt.Sprintf("the path class from %d GPU(s) to their NICs could not be determined", len(unknown))
		r.Subjects = append(r.Subjects, unknown...)
		r.Remediation = []string{f.seeConfig("the PCI Express port types that place switches")}
	case r.Status == Pass:
		r.Summary = fmt.Sprintf("NCCL uses GPUDirect RDMA by default for every GPU (%d GPUs, %d NICs)", len(gpus), len(nics))
		r.Subjects = nil
	default:
		r.Summary = fmt.Sprintf("%d GPU(s) have no NIC within NCCL's default GPUDirect RDMA reach: RDMA staged through host memory", len(r.Subjects))
		r.Remediation = []string{"place a NIC under the same PCIe switch as each GPU, or accept host-staged RDMA; " +
			"NCCL_NET_GDR_LEVEL=PHB (or SYS) raises the distance up to which NCCL uses GPUDirect RDMA, at a bandwidth cost: " +
			"it stays off where the NIC or GPU does not support it (gpudirect_rdma); NCCL's default cut-off is P2C " +
			"(NCCL_NET_GDR_C2C=1), the same as PXB where no path is P2C (NVIDIA/nccl src/graph/paths.cc ncclTopoCheckGdr)"}
	}
	if f.Hypervisor() {
		r.Summary += " (virtual topology)"
	}
	return r
}

// nearestNIC returns the NIC nearest to g by NCCL's path class
// (pathclass.Classes.NCCL, O(log depth) a pair).
func (f *Facts) nearestNIC(g *pcie.Device, nics []*pcie.Device) (*pcie.Device, pathclass.Result) {
	f.classesNCCL.Do(func() { f.pathClasses = pathclass.NewClasses(f.Node.Topology.Devices) })
	var best *pcie.Device
	var bestRes pathclass.Result
	for _, n := range nics {
		res := f.pathClasses.NCCL(g, n)
		if best == nil || (res.Class != pathclass.Unknown && (bestRes.Class == pathclass.Unknown || res.Class < bestRes.Class)) {
			best, bestRes = n, res
		}
	}
	return best, bestRes
}

// nearNIC is a GPU's nearest NIC and NCCL's path class to it.
type nearNIC struct {
	nic *pcie.Device
	res pathclass.Result
}

// pxnRelay finds another GPU h with a NIC n within PXB, the relay NCCL's PXN
// would use for g (src/graph/paths.cc ncclTopoComputePaths: the NIC's local
// GPU, NVLink-connected to g, within PXB of the NIC): the first such GPU that is
// NVLink-connected to g, else the first such GPU. near holds the nearest NIC of
// each of gpus and relays the indices of those with one within PXB; nv is
// nvlinkPair(g, h). h is nil when there is no candidate.
func (f *Facts) pxnRelay(g *pcie.Device, gpus []*pcie.Device, near []nearNIC, relays []int) (h, n *pcie.Device, nv nvlink) {
	known := f.nvmlGPU(g.Address) != nil
	for _, i := range relays {
		c := gpus[i]
		if c == g {
			continue
		}
		l := f.nvlinkPair(g.Address, c.Address)
		if l == nvlinkYes || h == nil {
			h, n, nv = c, near[i].nic, l
		}
		if l == nvlinkYes || !known {
			return // without NVML facts for g no other candidate is known to be linked
		}
	}
	return
}
