package check

import (
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/node"
)

// Features are the node's capabilities as short label-safe values, what
// scheduling decisions need (node-feature-discovery's features.d labels): the render package turns
// them into node-feature-discovery labels. Every value is at most 63 characters
// of [A-Za-z0-9._-], starting and ending with an alphanumeric.
type Features struct {
	// Ready is "true" when the overall status is pass or warn: no check of a
	// required capability failed or is unknown.
	Ready string `json:"ready"`
	// Overall is the report's overall status.
	Overall string `json:"overall"`
	// GPUs is the number of GPUs.
	GPUs string `json:"gpus"`
	// P2P is "true" when GPU peer-to-peer is usable as far as the checks can
	// tell: two or more GPUs, NVML does not report the driver refusing P2P
	// (nvmlDeviceGetP2PStatus read or write other than OK) for any pair, and
	// acs_path, iommu_mode, nvml_p2p_status and p2p_data_integrity neither
	// failed nor are unknown, whatever the requirements; "false" otherwise.
	P2P string `json:"p2p"`
	// ACS is "clear", "redirect" or "unknown".
	ACS string `json:"acs"`
	// IOMMU is "off", "pt", "dma" or "unknown".
	IOMMU string `json:"iommu"`
	// GDR names the GPUDirect RDMA paths: "dmabuf", "peermem", "dmabuf-peermem"
	// or "none".
	GDR string `json:"gdr"`
	// GDRCopy is "true" when gdrdrv is ready.
	GDRCopy string `json:"gdrcopy"`
	// VM is "true" in a virtual machine.
	VM string `json:"vm"`
}

// features derives the node's features from the facts and the results as the
// checks returned them, before requirements were applied.
func (f *Facts) features(results []Result, overall Status) Features {
	status := map[string]Status{}
	for _, r := range results {
		status[r.ID] = r.Status
	}
	ft := Features{
		Ready:   strconv.FormatBool(overall == Pass || overall == Warn),
		Overall: string(overall),
		GPUs:    strconv.Itoa(len(f.GPUs())),
		VM:      strconv.FormatBool(f.Hypervisor()),
		IOMMU:   f.iommuFeature(),
		GDR:     strings.Join(f.gdrPaths(), "-"),
		GDRCopy: strconv.FormatBool(status["gdrdrv"] == Pass || status["gdrdrv"] == Warn),
	}
	if ft.GDR == "" {
		ft.GDR = "none"
	}
	switch status["acs_path"] {
	case Fail:
		ft.ACS = "redirect"
	case Pass:
		ft.ACS = "clear"
	default:
		ft.ACS = "unknown"
	}
	p2p := len(f.GPUs()) >= 2 && !f.driverRefusesP2P()
	for _, id := range []string{"acs_path", "iommu_mode", "nvml_p2p_status", "p2p_data_integrity"} {
		if status[id] == Fail || status[id] == Unknown {
			p2p = false
		}
	}
	ft.P2P = strconv.FormatBool(p2p)
	return ft
}

// driverRefusesP2P reports whether NVML says the NVIDIA driver refuses P2P reads
// or writes between some pair of GPUs (nvmlDeviceGetP2PStatus).
func (f *Facts) driverRefusesP2P() bool {
	if f.Node.GPU == nil {
		return false
	}
	for _, p := range f.Node.GPU.Pairs {
		for _, s := range []*gpu.P2PStatus{p.P2P.Read, p.P2P.Write} {
			if s != nil && *s != gpu.P2POK {
				return true
			}
		}
	}
	return false
}

// iommuFeature classifies the IOMMU for the devices of interest.
func (f *Facts) iommuFeature() string {
	p := f.Node.Platform
	if len(p.IOMMUGroups) == 0 {
		return "off"
	}
	types := map[int]node.IOMMUDomainType{}
	for _, g := range p.IOMMUGroups {
		types[g.ID] = g.Type
	}
	identity := false
	for _, d := range f.devices {
		if d.IOMMUGroup == nil {
			continue
		}
		switch t := types[*d.IOMMUGroup]; {
		case t.Translated():
			return "dma"
		case t == node.IOMMUIdentity:
			identity = true
		}
	}
	if identity {
		return "pt"
	}
	return "unknown"
}

// gdrPaths returns the usable GPUDirect RDMA paths, "dmabuf" before "peermem".
func (f *Facts) gdrPaths() []string {
	p := f.Node.Platform
	var out []string
	if ok, _ := dmabufReady(p); ok {
		out = append(out, "dmabuf")
	}
	if f.peermem() {
		out = append(out, "peermem")
	}
	return out
}
