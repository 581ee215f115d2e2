package provision

import (
	"fmt"
	"slices"

	"github.com/p2pkit/p2pkit/iommugroup"
	"github.com/p2pkit/p2pkit/pcie"
)

// NVIDIA's GPUDirect platform shapes, as rdma-core's kernel-boot/rdma_topo (NVIDIA,
// 2025-26) recognises them, with the IDs it keys on and the ACS each needs. The
// facts come from that tool and NVIDIA's "Grace Blackwell CX8 GPUDirect RDMA" guide
// (docs.nvidia.com/multi-node-nvlink-systems/grace-blackwell-cx8-gpudirect-rdma-guide):
// the Grace CPU has no PCIe ATS, so a ConnectX-8 reaches the GPU below the same
// root port through a separate "Data Direct" DMA function.

// ShapeKind names a shape.
type ShapeKind string

// The shapes.
const (
	// ShapeDataDirect: a ConnectX-8 Data Direct DMA function and a GPU below one
	// Grace root port, through a ConnectX switch; the DMA function belongs to the
	// NIC whose VPD V3 (board UUID) it carries.
	ShapeDataDirect ShapeKind = "data-direct"
	// ShapeInline: a NIC and a GPU below one ConnectX switch (the GPU through a
	// second one), below a root port.
	ShapeInline ShapeKind = "inline"
	// ShapeNUMA: GPUs on root ports of their own (GB200, Vera), each NUMA node's
	// NICs and GPUs one complex; traffic between them crosses the CPU.
	ShapeNUMA ShapeKind = "numa"
)

// Device roles, by vendor and device ID (rdma_topo's pci_device_types).
const (
	roleNone = iota
	roleGraceRP
	roleVeraRP
	roleCXNIC
	roleCXDMA
	roleCXSwitch
	roleGPU
)

func role(d *pcie.Device) int {
	switch d.Vendor {
	case 0x10de:
		switch d.Device {
		case 0x22b1, 0x22b2, 0x22b8:
			return roleGraceRP
		case 0x2f95, 0x2f96:
			return roleVeraRP
		}
		if d.IsGPU() {
			return roleGPU
		}
	case 0x15b3:
		switch d.Device {
		case 0x1021, 0x1023, 0x1025, 0xa2dc: // ConnectX-7, -8, -9, BlueField-3
			return roleCXNIC
		case 0x2100: // ConnectX-8 DMA controller
			return roleCXDMA
		case 0x197b, 0x197c, 0x1979: // ports of BlueField-3 and ConnectX switches
			return roleCXSwitch
		}
	}
	return roleNone
}

// IsDataDirect reports whether d is a ConnectX-8 Data Direct DMA function.
func IsDataDirect(d *pcie.Device) bool { return role(d) == roleCXDMA }

// Shape is one NVIDIA complex of NICs and GPUs found on the machine.
type Shape struct {
	Kind ShapeKind
	// NICs are the NIC physical functions of the complex, in address order.
	NICs []*pcie.Device
	// GPUs are the complex's GPUs (one, but for ShapeNUMA).
	GPUs []*pcie.Device
	// DMA is the Data Direct function (ShapeDataDirect).
	DMA *pcie.Device
	// RootPort is the root port above the complex (not for ShapeNUMA).
	RootPort *pcie.Device
	// Upstream is the upstream port of the shared switch where the path turns;
	// NICPort (or DMAPort) and GPUPort are its downstream ports on each side.
	Upstream, NICPort, GPUPort, DMAPort *pcie.Device
	// NUMANode is the node of a ShapeNUMA complex.
	NUMANode int
	// Boards groups NICs by the board serial of their VPD, as rdma_topo does
	// ("" when not read).
	Boards []Board
}

// Board is the NIC functions of one adapter board, by VPD serial number.
type Board struct {
	Serial string // the VPD SN (a pseudonym in a redacted snapshot); "" unknown
	// NICs groups the board's physical functions by the port above them: one NIC
	// each, in address order.
	NICs [][]*pcie.Device
}

// FindShapes returns the NVIDIA shapes of t, decided as rdma_topo decides: any Data
// Direct function makes the machine Data Direct; else a GPU directly below a root
// port makes it NUMA; else each GPU below two ConnectX switches with a ConnectX NIC
// below the upper one is an inline complex. A machine of another kind (Broadcom or
// Microchip switches, a VM) has none.
func FindShapes(t *pcie.Topology) []Shape {
	var dma, gpus []*pcie.Device
	numa := false
	for _, d := range t.Devices {
		switch role(d) {
		case roleCXDMA:
			dma = append(dma, d)
		case roleGPU:
			gpus = append(gpus, d)
			if up := d.Upstream(); up != nil && up.Upstream() == nil && up.IsBridge() {
				numa = true
			}
		}
	}
	switch {
	case len(dma) > 0:
		return dataDirect(t, dma)
	case numa:
		return numaShapes(t)
	}
	var out []Shape
	for _, g := range gpus {
		if s, ok := inline(g); ok {
			out = append(out, s)
		}
	}
	return out
}

// parentOf returns d's upstream bridge when it has the role, else nil.
func parentOf(d *pcie.Device, r int) *pcie.Device {
	if d == nil {
		return nil
	}
	if up := d.Upstream(); up != nil && role(up) == r {
		return up
	}
	return nil
}

// dataDirect matches each DMA function: its port, the shared switch's upstream
// port and the Grace root port above; exactly one GPU below that root port, two
// switch levels below the shared one; and nothing else below the root port.
func dataDirect(t *pcie.Topology, dma []*pcie.Device) []Shape {
	var out []Shape
	for _, f := range dma {
		port := parentOf(f, roleCXSwitch)
		usp := parentOf(port, roleCXSwitch)
		rp := parentOf(usp, roleGraceRP)
		if rp == nil {
			continue
		}
		var gpu *pcie.Device
		n := 0
		for _, d := range t.Devices {
			if d != rp && below(d, rp) {
				n++
				if role(d) == roleGPU {
					gpu = d
				}
			}
		}
		dsp2 := parentOf(gpu, roleCXSwitch)
		gport := parentOf(parentOf(dsp2, roleCXSwitch), roleCXSwitch)
		if gport == nil || gport.Upstream() != usp || n != 7 {
			continue
		}
		nics := byVPD(t, f, "V3")
		out = append(out, Shape{Kind: ShapeDataDirect, NICs: nics, GPUs: []*pcie.Device{gpu}, DMA: f,
			RootPort: rp, Upstream: usp, DMAPort: port, GPUPort: gport, Boards: boards(nics)})
	}
	return out
}

// byVPD returns the NIC physical functions whose VPD keyword key equals f's.
func byVPD(t *pcie.Topology, f *pcie.Device, key string) []*pcie.Device {
	v := f.ProductData()
	if v == nil {
		return nil
	}
	want, ok := v.Keyword(key)
	if !ok {
		return nil
	}
	var out []*pcie.Device
	for _, d := range t.Devices {
		if d == f || d.IsVF() || role(d) != roleCXNIC {
			continue
		}
		if x := d.ProductData(); x != nil {
			if got, _ := x.Keyword(key); got == want {
				out = append(out, d)
			}
		}
	}
	return out
}

// inline matches a GPU below a ConnectX switch below another one's downstream port,
// with a ConnectX NIC elsewhere below the upper switch and a root port above it.
func inline(g *pcie.Device) (Shape, bool) {
	gport := parentOf(parentOf(parentOf(g, roleCXSwitch), roleCXSwitch), roleCXSwitch)
	usp := parentOf(gport, roleCXSwitch)
	if usp == nil {
		return Shape{}, false
	}
	rp := usp.Upstream()
	for rp != nil && rp.Upstream() != nil {
		rp = rp.Upstream()
	}
	s := Shape{Kind: ShapeInline, GPUs: []*pcie.Device{g}, RootPort: rp, Upstream: usp, GPUPort: gport}
	for _, port := range usp.Children {
		if port == gport {
			continue
		}
		for _, d := range descendants(port) {
			if role(d) == roleCXNIC && !d.IsVF() {
				s.NICs = append(s.NICs, d)
				s.NICPort = port
			}
		}
	}
	if s.NICPort == nil || rp == nil {
		return Shape{}, false
	}
	s.Boards = boards(s.NICs)
	return s, true
}

// numaShapes groups, per NUMA node, its ConnectX NICs and GPUs.
func numaShapes(t *pcie.Topology) []Shape {
	byNode := map[int]*Shape{}
	var nodes []int
	for _, d := range t.Devices {
		r := role(d)
		if d.NUMANode == nil || *d.NUMANode < 0 || d.IsVF() || r != roleCXNIC && r != roleGPU {
			continue
		}
		s := byNode[*d.NUMANode]
		if s == nil {
			s = &Shape{Kind: ShapeNUMA, NUMANode: *d.NUMANode}
			byNode[*d.NUMANode] = s
			nodes = append(nodes, *d.NUMANode)
		}
		if r == roleGPU {
			s.GPUs = append(s.GPUs, d)
		} else {
			s.NICs = append(s.NICs, d)
		}
	}
	slices.Sort(nodes)
	var out []Shape
	for _, n := range nodes {
		if s := byNode[n]; len(s.NICs) > 0 && len(s.GPUs) > 0 {
			s.Boards = boards(s.NICs)
			out = append(out, *s)
		}
	}
	return out
}

// descendants returns the functions below d (d excluded), depth first.
func descendants(d *pcie.Device) []*pcie.Device {
	var out []*pcie.Device
	var walk func(x *pcie.Device, depth int)
	walk = func(x *pcie.Device, depth int) {
		if depth > 256 {
			return
		}
		for _, c := range x.Children {
			out = append(out, c)
			walk(c, depth+1)
		}
	}
	walk(d, 0)
	return out
}

// boards groups NIC functions by VPD serial number, then by the port above them,
// as rdma_topo's NVCX_Topo does.
func boards(nics []*pcie.Device) []Board {
	var out []Board
	for _, d := range nics {
		sn := ""
		if v := d.ProductData(); v != nil {
			sn, _ = v.Keyword("SN")
		}
		i := slices.IndexFunc(out, func(b Board) bool { return b.Serial == sn })
		if i < 0 {
			out = append(out, Board{Serial: sn})
			i = len(out) - 1
		}
		b := &out[i]
		j := slices.IndexFunc(b.NICs, func(n []*pcie.Device) bool { return n[0].Upstream() == d.Upstream() })
		if j < 0 {
			b.NICs = append(b.NICs, nil)
			j = len(b.NICs) - 1
		}
		b.NICs[j] = append(b.NICs[j], d)
	}
	return out
}

// isolated is the value of the SV, RR, CR and UF bits a port's capability offers:
// what the kernel sets with an IOMMU (pci_std_enable_acs()) and what rdma_topo calls
// "kernel_acs_isolated" (a Vera root port has no Completion Redirect).
func isolated(d *pcie.Device) uint16 {
	if acs := hasACS(d); acs != nil {
		return acs.Capability & iommugroup.ReqACSFlags
	}
	return 0
}

// plan adds the shape's own bits to w for mode and returns notes.
func (s Shape) plan(w wants, mode Mode) []string {
	switch s.Kind {
	case ShapeDataDirect:
		return s.planDataDirect(w, mode)
	case ShapeInline:
		return s.planInline(w, mode)
	}
	return s.numaNotes()
}

const (
	whyDDRequest    = "Data Direct: RR off toward the DMA function, so its writes reach the GPU directly (rdma_topo)"
	whyDDCompletion = "Data Direct: CR off toward the GPU, so its completions reach the DMA function directly (rdma_topo)"
	whyDDGroup      = "Data Direct: SV off on the Grace root port puts the segment into one IOMMU group, which the NVIDIA driver checks (rdma_topo)"
	whyShapeIso     = "isolation kept on the shape's other ports (rdma_topo)"
	whyInlineGroup  = "SV off on the root port above the shared switch, so that the NIC and the GPU, which reach each other directly, share one IOMMU group (rdma_topo's check)"
)

// planDataDirect sets the asymmetric bits of rdma_topo's DMA complex whatever the
// mode: RR off (SV, CR, UF on) on the DMA function's port, CR off (SV, RR, UF on) on
// the GPU's, SV off (RR, CR, UF on) on the Grace root port, isolation on every other
// port of the segment.
func (s Shape) planDataDirect(w wants, mode Mode) []string {
	// EC is decided too (off, as the kernel leaves it), so that the shape decides
	// every bit the generic rule does on these ports.
	req := iommugroup.ReqACSFlags | pcie.ACSEgressControl
	w.set(s.DMAPort, req, isolated(s.DMAPort)&^pcie.ACSRequestRedirect, whyDDRequest, true)
	w.set(s.GPUPort, req, isolated(s.GPUPort)&^pcie.ACSCompletionRedirect, whyDDCompletion, true)
	w.set(s.RootPort, req, isolated(s.RootPort)&^pcie.ACSSourceValidation, whyDDGroup, true)
	for _, d := range descendants(s.RootPort) {
		if x := w[d]; hasACS(d) != nil && d.IsBridge() && (x == nil || !x.shape) {
			w.set(d, req, isolated(d), whyShapeIso, true)
		}
	}
	notes := []string{fmt.Sprintf("Data Direct: %s is the DMA function of NIC %s; the mainline kernel's P2PDMA verdict "+
		"does not describe this path (NVIDIA's kernel, linux-nvidia 6.14 and later, carries the patches it needs)",
		s.DMA.Address, addrList(s.NICs))}
	if mode == ModeVirtHost {
		notes = append(notes, "Data Direct has no virtualization-host plan (rdma_topo refuses --virt there): the shape's bits are planned")
	}
	return notes
}

// planInline: on bare metal, besides the generic rule, SV off on the root port
// above the shared switch; on a virtualization host, isolation on that root port
// too (the generic rule sets Direct Translated P2P on the NIC's port).
func (s Shape) planInline(w wants, mode Mode) []string {
	if hasACS(s.RootPort) == nil {
		return []string{fmt.Sprintf("root port %s above the inline complex has no ACS capability", s.RootPort.Address)}
	}
	if mode == ModeVirtHost {
		w.set(s.RootPort, iommugroup.ReqACSFlags, isolated(s.RootPort), whyShapeIso, true)
		return nil
	}
	w.set(s.RootPort, pcie.ACSSourceValidation, 0, whyInlineGroup, true)
	return nil
}

// numaNotes: NVIDIA's guide says Grace has no PCIe ATS, and rdma_topo's NUMA check
// wants the NICs' ATS capability off there.
func (s Shape) numaNotes() []string {
	var notes []string
	for _, g := range s.GPUs {
		if r := role(g.Upstream()); r != roleGraceRP && r != roleVeraRP {
			return nil
		}
	}
	for _, n := range s.NICs {
		if ats, _ := n.ATSState(); ats != nil {
			notes = append(notes, fmt.Sprintf("NIC %s on NUMA node %d has the ATS capability, which the Grace CPU "+
				"does not support: turn it off (mlxconfig -d %s set ATS_ENABLED=false, then a host reboot)", n.Address, s.NUMANode, n.Address))
		}
	}
	return notes
}

func addrList(ds []*pcie.Device) string {
	if len(ds) == 0 {
		return "(none matched by VPD V3)"
	}
	s := ""
	for i, d := range ds {
		if i > 0 {
			s += ", "
		}
		s += d.Address.String()
	}
	return s
}
