package node

import (
	"github.com/p2pkit/p2pkit/internal/gpu"
	"github.com/p2pkit/p2pkit/pcie"
)

// gpuAt returns NVML's view of the GPU at a, or nil.
func (n *Node) gpuAt(a pcie.Address) *gpu.GPU {
	if n.GPU == nil {
		return nil
	}
	for i := range n.GPU.GPUs {
		if g := &n.GPU.GPUs[i]; g.Address != nil && *g.Address == a {
			return g
		}
	}
	return nil
}

// NVLinks returns the number of active NVLinks joining two GPUs, as nvidia-smi
// counts them for NV#: links that end at the other GPU, or, when both GPUs reach
// NVSwitches, the links each has into the switch fabric (the smaller count).
// It is 0 without NVML facts.
func (n *Node) NVLinks(a, b *pcie.Device) int {
	ga, gb := n.gpuAt(a.Address), n.gpuAt(b.Address)
	if ga == nil || gb == nil || ga.NVLink == nil || gb.NVLink == nil {
		return 0
	}
	direct, switchA := 0, 0
	for _, l := range ga.NVLink.Links {
		switch {
		case l.Remote != nil && *l.Remote == b.Address:
			direct++
		case l.RemoteType == "switch":
			switchA++
		}
	}
	if direct > 0 {
		return direct
	}
	switchB := 0
	for _, l := range gb.NVLink.Links {
		if l.RemoteType == "switch" {
			switchB++
		}
	}
	return min(switchA, switchB)
}
