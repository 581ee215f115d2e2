package nccl

import (
	"errors"
	"strconv"
	"strings"
)

// This file holds the rules that changed between NCCL releases. Each names the
// first release that behaves the new way, as the release tags of
// github.com/NVIDIA/nccl show it (vX.Y.Z-1); a release between two tags is taken
// to behave as the later one's predecessor until the later tag.

// ErrLimit is returned (wrapped) for a topology beyond what the NCCL release can
// hold: NCCL itself fails to initialise on it.
var ErrLimit = errors.New("nccl: topology beyond NCCL's limits")

// limits are NCCL's fixed topology sizes of one release.
type limits struct {
	// nodes is NCCL_TOPO_MAX_NODES, the nodes of one type a system holds;
	// links NCCL_TOPO_MAX_LINKS, the links of one node.
	nodes, links       int
	nodesSrc, linksSrc string
}

// limitsOf returns the limits of release v: NCCL_TOPO_MAX_NODES (src/include/graph.h)
// is 256 before 2.27, 576 from 2.27 and 640 from 2.29.7; NCCL_TOPO_MAX_LINKS
// (src/graph/topo.h) is 32 before 2.21, 128 from 2.21 and 576 from 2.25.
func limitsOf(v Version) limits {
	l := limits{nodes: 256, links: 32, nodesSrc: "256 before 2.27, src/include/graph.h", linksSrc: "32 before 2.21, src/graph/topo.h"}
	switch {
	case v.atLeast(2, 29, 7):
		l.nodes, l.nodesSrc = 640, "640 from 2.29.7, src/include/graph.h"
	case v.AtLeast(2, 27):
		l.nodes, l.nodesSrc = 576, "576 from 2.27, src/include/graph.h"
	}
	switch {
	case v.AtLeast(2, 25):
		l.links, l.linksSrc = 576, "576 from 2.25, src/graph/topo.h"
	case v.AtLeast(2, 21):
		l.links, l.linksSrc = 128, "128 from 2.21, src/graph/topo.h"
	}
	return l
}

// atLeast reports whether v is major.minor.patch or later.
func (v Version) atLeast(major, minor, patch int) bool {
	if v.Major != major || v.Minor != minor {
		return v.AtLeast(major, minor)
	}
	return v.Patch >= patch
}

// interCPUBW is ncclTopoGetInterCpuBw (src/graph/topo.cc) of release v: the
// bandwidth NCCL gives the SMP link between two CPU sockets. Per release:
//   - AMD x86 (AMD_BW, 16 GB/s): in 2.16.2, dropped in 2.16.5, back from 2.19.1;
//     other releases give AMD the default, LOC_BW;
//   - Intel Sapphire and Emerald Rapids (SRP_QPI_BW, ERP_QPI_BW) from 2.26;
//     before, NCCL classified them as Skylake (SKL_QPI_BW);
//   - everything else as in 2.28.
func interCPUBW(c *topoNode, v Version) float32 {
	switch {
	case c.arch == archPower:
		return p9BW
	case c.arch == archARM:
		return armBW
	case c.arch == archX86 && c.vendor == vendorIntel:
		return intelQPIBW(c.model, v)
	case c.arch == archX86 && c.vendor == vendorAMD:
		if amdInterCPU(v) {
			return amdBW
		}
	case c.arch == archX86 && c.vendor == vendorZhaoxin:
		if c.model == modelYongfeng {
			return yongfengBW
		}
		return zpiBW
	}
	return locBW
}

// amdInterCPU reports whether release v has the AMD branch of
// ncclTopoGetInterCpuBw: 2.16.2 to 2.16.4, and 2.19 on.
func amdInterCPU(v Version) bool {
	return v.AtLeast(2, 19) || v.Major == 2 && v.Minor == 16 && v.Patch < 5 && v.Patch >= 2
}

func intelQPIBW(model int, v Version) float32 {
	if !v.AtLeast(2, 26) && model >= modelSKL {
		return sklQPIBW
	}
	switch model {
	case modelERP:
		return erpQPIBW
	case modelSRP:
		return srpQPIBW
	case modelSKL:
		return sklQPIBW
	}
	return bdwQPIBW
}

// nvlinkBW is ncclTopoNVLinkBw (src/graph/topo.h) of release v: the bandwidth of
// one NVLink for a compute capability. SM90_NVLINK_BW was 20.0 before 2.20 and
// 20.6 from it; SM100_NVLINK_BW exists from 2.25 (before, Blackwell took
// Hopper's).
func nvlinkBW(sm int, v Version) float32 {
	switch {
	case sm >= 100 && v.AtLeast(2, 25):
		return sm100NVLink
	case sm >= 90:
		if !v.AtLeast(2, 20) {
			return sm80NVLink
		}
		return sm90NVLink
	case sm == 86:
		return sm86NVLink
	case sm >= 80:
		return sm80NVLink
	case sm >= 70:
		return sm70NVLink
	case sm >= 60:
		return sm60NVLink
	}
	return sm80NVLink
}

// pathNumbers returns the path types of release v in NCCL's numbering
// (src/graph/topo.h PATH_*), by number: PATH_C2C was inserted in 2.26, PATH_P2C
// in 2.27 (after PXN, then moved before it in 2.27.5). NCCL prints these numbers
// in its GPU Direct RDMA lines ("distance 8 > 5").
func pathNumbers(v Version) []PathType {
	switch {
	case v.atLeast(2, 27, 5):
		return []PathType{PathLOC, PathNVL, PathNVB, PathC2C, PathPIX, PathPXB, PathP2C, PathPXN, PathPHB, PathSYS, PathNET, PathDIS}
	case v.AtLeast(2, 27):
		return []PathType{PathLOC, PathNVL, PathNVB, PathC2C, PathPIX, PathPXB, PathPXN, PathP2C, PathPHB, PathSYS, PathNET, PathDIS}
	case v.AtLeast(2, 26):
		return []PathType{PathLOC, PathNVL, PathNVB, PathC2C, PathPIX, PathPXB, PathPXN, PathPHB, PathSYS, PathNET, PathDIS}
	}
	return []PathType{PathLOC, PathNVL, PathNVB, PathPIX, PathPXB, PathPXN, PathPHB, PathSYS, PathNET, PathDIS}
}

// PathNumber returns the path type NCCL release v numbers n; ok is false for a
// number the release does not have.
func PathNumber(v Version, n int) (PathType, bool) {
	nums := pathNumbers(v)
	if n < 0 || n >= len(nums) {
		return 0, false
	}
	return nums[n], true
}

// pathName is the name release v prints for path type t (topoPathTypeStr in
// src/graph/topo.cc): before 2.21 the table had no "NET", and PATH_NET, one past
// SYS, printed as "DIS".
func (s *System) pathName(t PathType) string {
	if t == PathNET && !s.ver.AtLeast(2, 21) {
		return "DIS"
	}
	return t.String()
}

// legacyLabels reports whether release v prints node identifiers without the
// system part and in capitals, and bandwidths in path lines with six decimals
// ("GPU/60 :GPU/60 (0/5000.000000/LOC)"); from 2.21 it prints "GPU/0-60" and one
// decimal (printNodePaths in src/graph/paths.cc).
func legacyLabels(v Version) bool { return !v.AtLeast(2, 21) }

// labelOf names n as release v does in its INFO lines.
func (s *System) labelOf(n *topoNode) string {
	if legacyLabels(s.ver) {
		return nodeNames[n.typ] + "/" + strings.ToUpper(strconv.FormatUint(uint64(n.id), 16))
	}
	return n.label()
}

// headerOf names n at the start of its path line: as labelOf from 2.23; in 2.21
// and 2.22 printNodePaths still began the line the old way ("GPU/CE000 :").
func (s *System) headerOf(n *topoNode) string {
	if !s.ver.AtLeast(2, 23) {
		return nodeNames[n.typ] + "/" + strings.ToUpper(strconv.FormatUint(uint64(n.id), 16))
	}
	return n.label()
}

// bwString formats a path bandwidth as release v's path lines do.
func (s *System) bwString(bw float32) string {
	if legacyLabels(s.ver) {
		return strconv.FormatFloat(float64(bw), 'f', 6, 64)
	}
	return strconv.FormatFloat(float64(bw), 'f', 1, 64)
}
