package nccl

import (
	"strconv"
	"strings"
)

// storesPaths reports the node types whose paths are kept after a search: the
// types searches start from (CPU, GPU, NET, NVSwitch). NCCL keeps a path in every
// node; the paths of PCI switches and NICs are only steps of a search, and nothing
// reads them after it, so only their search state is kept, for one search at a
// time.
func storesPaths(typ nodeType) bool { return typ != nodePCI && typ != nodeNIC }

// path returns n's path to the node of type t at index i; DIS when n reaches no
// node of that type (a malformed topology can leave a node unconnected).
func path(n *topoNode, t nodeType, i int) topoPath {
	if n.paths[t] == nil || i < 0 || i >= len(n.paths[t]) {
		return topoPath{typ: PathDIS}
	}
	return n.paths[t][i]
}

// search is the state of one breadth-first search, per node by its global index.
type search struct {
	path    []topoPath
	touched []bool // the node had a link examined towards it (NCCL allocates its paths)
	queued  []int  // the level the node was last queued for, +1 (0: never)
}

func (s *System) newSearch() *search {
	n := len(s.all)
	return &search{path: make([]topoPath, n), touched: make([]bool, n), queued: make([]int, n)}
}

func (q *search) reset() {
	clear(q.touched)
	clear(q.queued)
	for i := range q.path {
		q.path[i] = topoPath{typ: PathDIS}
	}
}

// setPaths is ncclTopoSetPaths (src/graph/paths.cc): a breadth-first search from
// base that records, in every node it reaches, the path back to base. A path
// replaces another when it is shorter or new and has more bandwidth; its type is
// the worst link type on it, with a PCI switch-to-switch hop counting as PXB, a PCI
// hop touching a CPU as PHB, and NVLink through a GPU as NVB. Routing through a GPU
// is allowed only as one NVLink hop between GPUs (and not at all with NVB disabled).
//
// NCCL finds each node's path slot by a linear search (getPath) and each
// next-level node by scanning the level's list; here both are indexed, so one
// search costs O(nodes + links) and the paths of all bases O(bases·(nodes+links)).
// The order in which nodes and links are visited is NCCL's, which decides between
// paths of equal length and bandwidth. Only the first link of a path is kept (the
// rest is the next node's path), which is all that is read of it.
func (s *System) setPaths(q *search, base *topoNode, nvbDisable bool) {
	q.reset()
	bt, bi := base.typ, base.idx
	q.touched[base.gid] = true
	q.path[base.gid] = topoPath{bw: locBW, typ: PathLOC}
	list := []*topoNode{base}
	for level := 1; len(list) > 0; level++ {
		var next []*topoNode
		for _, n := range list {
			p := q.path[n.gid]
			for _, l := range n.links {
				s.work++
				rem := l.rem
				q.touched[rem.gid] = true
				if n != base && n.typ == nodeGPU &&
					(nvbDisable || l.typ != linkNVL || rem.typ != nodeGPU || p.count > 1) {
					continue
				}
				rp := &q.path[rem.gid]
				bw := min(p.bw, l.bw)
				if (rp.bw == 0 || rp.count > p.count) && rp.bw < bw {
					back := reverse(rem, n, l.typ)
					if back == nil {
						continue // NCCL fails the whole init here; a link has no reverse
					}
					*rp = topoPath{first: back, count: p.count + 1, bw: bw, typ: max(p.typ, hopType(n, rem, l, p, p.count+1))}
					if q.queued[rem.gid] != level {
						q.queued[rem.gid] = level
						next = append(next, rem)
					}
				}
			}
		}
		list = next
	}
	for _, n := range s.all {
		if !q.touched[n.gid] || !storesPaths(n.typ) {
			continue
		}
		if n.paths[bt] == nil {
			n.paths[bt] = make([]topoPath, len(s.nodes[bt]))
			for j := range n.paths[bt] {
				n.paths[bt][j].typ = PathDIS
			}
		}
		n.paths[bt][bi] = q.path[n.gid]
	}
}

// reverse is the link from rem back to n of type typ, the first link of rem's new
// path; nil when there is none.
func reverse(rem, n *topoNode, typ linkType) *topoLink {
	for _, rl := range rem.links {
		if rl.rem == n && rl.typ == typ {
			return rl
		}
	}
	return nil
}

// hopType is the type one hop from n to rem over l adds to a path of n's, count
// hops long once extended: the link's type, LOC for a network link, PXB between
// PCI switches, PHB for PCI through a CPU, NVB for NVLink through a GPU.
func hopType(n, rem *topoNode, l *topoLink, p topoPath, count int) PathType {
	typ := PathType(l.typ)
	if l.typ == linkNET {
		typ = PathLOC
	}
	if n.typ == nodePCI && rem.typ == nodePCI {
		typ = PathPXB
	}
	if l.typ == linkPCI && (n.typ == nodeCPU || rem.typ == nodeCPU) {
		typ = PathPHB
	}
	if n.typ == nodeGPU && p.typ == PathNVL && typ == PathNVL && count > 1 {
		typ = PathNVB
	}
	return typ
}

// computeAll runs setPaths from every node of the types NCCL starts from, in
// NCCL's order (CPUs, GPUs, network devices, NVSwitches).
func (s *System) computeAll(nvbDisable bool) {
	q := s.newSearch()
	for _, t := range []nodeType{nodeCPU, nodeGPU, nodeNET, nodeNVS} {
		for _, n := range s.nodes[t] {
			s.setPaths(q, n, nvbDisable)
		}
	}
}

// localCPUIndex is ncclGetLocalCpu: the CPU fewest hops from GPU g; -1 when none.
func (s *System) localCPUIndex(g *topoNode) int {
	best, hops := -1, 0
	if g.paths[nodeCPU] == nil {
		return -1
	}
	for c := range s.nodes[nodeCPU] {
		h := g.paths[nodeCPU][c].count
		if h > 0 && (hops == 0 || h < hops) {
			best, hops = c, h
		}
	}
	return best
}

// mergePathType is mergePathType in src/graph/paths.cc: C2C to the CPU then PCIe
// through it is P2C, else the worse type.
func mergePathType(a, b PathType) PathType {
	if max(a, b) == PathPHB && min(a, b) == PathC2C {
		return PathP2C
	}
	return max(a, b)
}

// addInterStep is addInterStep in src/graph/paths.cc: the path from src to the node
// of type t2 at index i2 is rerouted through the node of type tx at index ix.
func (s *System) addInterStep(tx nodeType, ix int, src *topoNode, t2 nodeType, i2 int) {
	mid := s.nodes[tx][ix]
	if src.paths[tx] == nil || mid.paths[t2] == nil || src.paths[t2] == nil {
		return // not connected: NCCL would have failed earlier
	}
	a := src.paths[tx][ix]
	b := mid.paths[t2][i2]
	p := &src.paths[t2][i2]
	p.first = a.first
	if a.count == 0 {
		p.first = b.first
	}
	p.count = a.count + b.count
	p.typ = mergePathType(a.typ, b.typ)
	if tx == nodeGPU {
		p.typ = PathPXN
	}
	p.bw = min(a.bw, b.bw)
}

// pathLineSize is the buffer printNodePaths (src/graph/paths.cc) writes one path
// line into: what does not fit is cut, at 1023 characters.
const pathLineSize = 1024

// FormatPaths writes the path lines NCCL prints at NCCL_DEBUG=INFO with the GRAPH
// subsystem (printNodePaths in src/graph/paths.cc), one per GPU then per network
// device, without the "NCCL INFO " prefix: "GPU/0-60 :GPU/0-60 (0/5000.0/LOC) ...".
// Like NCCL's (from 2.21), a line is cut at 1023 characters.
func (s *System) FormatPaths() []string {
	var out []string
	for _, t := range []nodeType{nodeGPU, nodeNET} {
		for _, n := range s.nodes[t] {
			out = append(out, s.pathLine(n))
		}
	}
	return out
}

func (s *System) pathLine(n *topoNode) string {
	var b strings.Builder
	b.WriteString(s.headerOf(n) + " :")
	for pt := range nodeTypes {
		if n.paths[pt] == nil {
			continue
		}
		for i, m := range s.nodes[pt] {
			if b.Len() >= pathLineSize && !legacyLabels(s.ver) {
				break
			}
			p := n.paths[pt][i]
			b.WriteString(s.labelOf(m) + " (" + strconv.Itoa(p.count) + "/" + s.bwString(p.bw) + "/" + s.pathName(p.typ) + ") ")
		}
	}
	if b.Len() > pathLineSize-1 && !legacyLabels(s.ver) {
		return b.String()[:pathLineSize-1]
	}
	return b.String()
}
