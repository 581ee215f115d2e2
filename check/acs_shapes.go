package check

import (
	"fmt"

	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/provision"
)

// refDataDirect is where the Data Direct shape's ACS comes from.
const refDataDirect = "rdma-core kernel-boot/rdma_topo (NVCX_DMA_Complex: compute_acs, check)"

// dataDirect judges NVIDIA's Data Direct shapes (provision.FindShapes), whose path
// the mainline kernel's P2PDMA verdict does not describe: the ports of the shape must
// hold the bits `p2pcheck fix` plans for it (RR off toward the DMA function, CR off
// toward the GPU, SV off on the Grace root port, as rdma_topo computes them), and the
// DMA function and the GPU must share one IOMMU group, which the NVIDIA driver checks
// (rdma_topo: "Correct iommu_groups are required to avoid
// NVreg_GrdmaPciTopoCheckOverride"). It returns a finding per problem, all failing
// gdr; none on a machine without the shape.
func (f *Facts) dataDirect() []Finding {
	t := f.Node.Topology
	var pairs [][2]*pcie.Device
	var shapes []provision.Shape
	for _, s := range provision.FindShapes(t) {
		if s.Kind == provision.ShapeDataDirect {
			pairs, shapes = append(pairs, [2]*pcie.Device{s.DMA, s.GPUs[0]}), append(shapes, s)
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	var out []Finding
	plan := provision.NewPlan(t, f.Node.P2P(), pairs,
		provision.Options{Mode: provision.ModeBareMetal, Kernel: f.Node.Release(), IOMMU: true})
	for _, a := range plan.Actions {
		out = append(out, Finding{Subject: a.Device.Address.String(), Status: Fail, Message: fmt.Sprintf(
			"ACSCtl %s (%#04x), the Data Direct shape needs %#04x: %s; fix: %s",
			pcie.ACSString(a.Control), a.Control, a.Planned, a.Why, a.Setpci)})
	}
	for _, s := range shapes {
		dg, gg := s.DMA.IOMMUGroup, s.GPUs[0].IOMMUGroup
		if dg != nil && gg != nil && *dg != *gg {
			out = append(out, Finding{Subject: s.DMA.Address.String() + "<->" + s.GPUs[0].Address.String(), Status: Fail,
				Message: fmt.Sprintf("Data Direct function and GPU in IOMMU groups %d and %d: the NVIDIA driver needs one "+
					"(else NVreg_GrdmaPciTopoCheckOverride=1); SV off on the Grace root port %s at boot gives it "+
					"(p2pcheck fix --persist, then a reboot: groups form at boot)", *dg, *gg, s.RootPort.Address)})
		}
	}
	return out
}
