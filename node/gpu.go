package node

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/snapshot"
)

// snapshotFacts takes what a snapshot says about itself: a warning when its config
// files were captured truncated, and the NVML facts it recorded, so that every
// command gives on the snapshot the answer it gave live.
func (n *Node) snapshotFacts(root hostfs.Root, opt Options) {
	m, err := snapshot.ReadManifest(root)
	if err != nil {
		n.Warnings = append(n.Warnings, err)
	}
	if m != nil && m.TruncatedConfigs > 0 {
		n.Warnings = append(n.Warnings, fmt.Errorf("node: the snapshot holds truncated config space for %d function(s): "+
			"it was taken without root, which shows 64 bytes of config space; ACS, port types and extended capabilities are unknown", m.TruncatedConfigs))
	}
	if m != nil && m.Source == snapshot.SourceRDMATopo {
		n.Warnings = append(n.Warnings, errors.New("node: an rdma_topo dump records no driver, BAR or /proc "+
			"file and leaves out system functions such as the first function of a root bus, which the kernel's P2PDMA "+
			"host-bridge whitelist reads: verdicts through a host bridge and whatever rests on a driver are not the machine's"))
	}
	if opt.NoGPU {
		return
	}
	b, err := snapshot.RecordedNVML(root)
	if err != nil || b == nil {
		if err != nil {
			n.Warnings = append(n.Warnings, err)
		}
		return
	}
	var f gpu.Facts
	if err := json.Unmarshal(b, &f); err != nil {
		n.Warnings = append(n.Warnings, fmt.Errorf("node: the snapshot's NVML facts: %w", err))
		return
	}
	n.GPU = &f
}

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
