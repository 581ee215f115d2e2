package check

import (
	"slices"

	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/pcie"
)

// nvlink is whether two GPUs talk over NVLink, as far as NVML's facts tell.
type nvlink uint8

const (
	nvlinkUnknown nvlink = iota // NVML's facts do not say
	nvlinkNo                    // both GPUs' NVLinks are known and none joins them
	nvlinkYes                   // a link, the fabric or the driver's NVLink P2P status joins them
)

// nvlinkPair says whether the GPUs at a and b talk over NVLink, from NVML: the
// driver's NVLink P2P status for the pair (nvmlDeviceGetP2PStatus with
// NVML_P2P_CAPS_INDEX_NVLINK), a link from one to the other, or both having
// links to NVSwitches (HGX, NVL).
func (f *Facts) nvlinkPair(a, b pcie.Address) nvlink {
	ga, gb := f.nvmlGPU(a), f.nvmlGPU(b)
	if ga == nil || gb == nil {
		return nvlinkUnknown
	}
	if f.nvlinkOK[[2]int{ga.Index, gb.Index}] {
		return nvlinkYes
	}
	if linked(ga.NVLink, "gpu", &b) || linked(gb.NVLink, "gpu", &a) ||
		linked(ga.NVLink, "switch", nil) && linked(gb.NVLink, "switch", nil) {
		return nvlinkYes
	}
	if ga.NVLink == nil || gb.NVLink == nil {
		return nvlinkUnknown
	}
	return nvlinkNo
}

// linked reports an active NVLink to a device of type typ ("gpu", "switch"), at
// address to when it is not nil.
func linked(l *gpu.NVLink, typ string, to *pcie.Address) bool {
	return l != nil && slices.ContainsFunc(l.Links, func(p gpu.NVLinkPeer) bool {
		return p.RemoteType == typ && (to == nil || p.Remote != nil && *p.Remote == *to)
	})
}

// overNVLink reports whether p is a GPU pair that NVML says talks over NVLink.
func (f *Facts) overNVLink(p pair) bool {
	return p.a.IsGPU() && p.b.IsGPU() && f.nvlinkPair(p.a.Address, p.b.Address) == nvlinkYes
}
