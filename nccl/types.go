package nccl

import (
	"fmt"
	"strconv"
)

// PathType is NCCL's path type between two nodes of its topology (src/graph/topo.h,
// NCCL 2.28 numbering). Lower is closer. NCCL's numbers changed between releases
// (PATH_C2C, PATH_P2C and PATH_PXN were inserted), so PathTypes are shown by name.
type PathType int

// Path types, as #defined in src/graph/topo.h.
const (
	PathLOC PathType = iota // the node itself
	PathNVL                 // NVLink
	PathNVB                 // NVLink through an intermediate GPU
	PathC2C                 // C2C between GPU and CPU
	PathPIX                 // at most one PCIe bridge
	PathPXB                 // several PCIe bridges, no host bridge
	PathP2C                 // C2C to the CPU then PCIe to a NIC
	PathPXN                 // to a NIC through an intermediate GPU
	PathPHB                 // through a PCIe host bridge (the CPU)
	PathSYS                 // across the SMP interconnect between NUMA nodes
	PathNET                 // through the network
	PathDIS                 // disconnected
)

// pathNames is topoPathTypeStr in src/graph/topo.cc.
var pathNames = [...]string{"LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS"}

// String returns NCCL's name, e.g. "PHB".
func (p PathType) String() string {
	if p >= 0 && int(p) < len(pathNames) {
		return pathNames[p]
	}
	return "PathType(" + strconv.Itoa(int(p)) + ")"
}

// MarshalText implements encoding.TextMarshaler with NCCL's name.
func (p PathType) MarshalText() ([]byte, error) {
	if p < 0 || int(p) >= len(pathNames) {
		return nil, fmt.Errorf("nccl: invalid path type %d", int(p))
	}
	return []byte(p.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with NCCL's name.
func (p *PathType) UnmarshalText(b []byte) error {
	v, ok := ParsePathType(string(b))
	if !ok {
		return fmt.Errorf("nccl: unknown path type %q", b)
	}
	*p = v
	return nil
}

// ParsePathType reads NCCL's name of a path type ("PIX", "PHB", ...).
func ParsePathType(s string) (PathType, bool) {
	for i, n := range pathNames {
		if n == s {
			return PathType(i), true
		}
	}
	return 0, false
}

// levelsOldToNew maps NCCL's old numeric levels (0-5) to path types, as the array
// of that name in src/graph/paths.cc does.
var levelsOldToNew = [...]PathType{PathLOC, PathPIX, PathPXB, PathPHB, PathSYS, PathSYS}

// ParseLevel reads a NCCL_P2P_LEVEL or NCCL_NET_GDR_LEVEL value as ncclGetLevel in
// src/graph/paths.cc does: a path type name up to SYS, or an old-style number whose
// first character is a digit (strtol, clamped to 5). ok is false for anything else,
// which NCCL ignores (the default applies).
func ParseLevel(s string) (PathType, bool) {
	for i := PathLOC; i <= PathSYS; i++ {
		if s == pathNames[i] {
			return i, true
		}
	}
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	n, _ := strtoll(s)
	if n < 0 {
		// strtol of a leading digit never yields a negative number; a value
		// that overflowed comes back as the maximum.
		n = int64(len(levelsOldToNew) - 1)
	}
	n = min(n, int64(len(levelsOldToNew)-1))
	return levelsOldToNew[n], true
}

// nodeType is a node type of NCCL's system graph (src/graph/topo.h, NCCL 2.28:
// GPU 0, PCI 1, NVS 2, CPU 3, NIC 4, NET 5); CPU nodes are NUMA nodes.
type nodeType int

// Node types of NCCL's system graph.
const (
	nodeGPU nodeType = iota
	nodePCI
	nodeNVS
	nodeCPU
	nodeNIC
	nodeNET
	nodeTypes
)

// nodeNames is topoNodeTypeStr in src/graph/topo.cc.
var nodeNames = [nodeTypes]string{"GPU", "PCI", "NVS", "CPU", "NIC", "NET"}

// linkType is a link type of NCCL's system graph (src/graph/topo.h, NCCL 2.28);
// link types share numbers with the path types they start.
type linkType int

// Link types.
const (
	linkLOC = linkType(PathLOC)
	linkNVL = linkType(PathNVL)
	linkC2C = linkType(PathC2C)
	linkPCI = linkType(PathPIX)
	linkSYS = linkType(PathSYS)
	linkNET = linkType(PathNET)
)

// Bandwidths in GB/s from src/graph/topo.h.
const (
	locBW       = 5000.0
	sm60NVLink  = 18.0
	sm70NVLink  = 20.0
	sm80NVLink  = 20.0
	sm86NVLink  = 12.0
	sm90NVLink  = 20.6
	sm100NVLink = 40.1
	bdwQPIBW    = 6.0
	sklQPIBW    = 10.0
	srpQPIBW    = 22.0
	erpQPIBW    = 40.0
	amdBW       = 16.0
	p9BW        = 32.0
	armBW       = 6.0
	zpiBW       = 6.0
	yongfengBW  = 9.0
)
