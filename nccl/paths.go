package nccl

import (
	"fmt"
	"slices"
	"strings"
)

// pathTo returns n's path to the node of type t at index i, allocating n's paths
// of that type (all DIS) on first use, as ncclTopoSetPaths does.
func (s *System) pathTo(n *topoNode, t, i int) *topoPath {
	if n.paths[t] == nil {
		n.paths[t] = make([]topoPath, len(s.nodes[t]))
		for j := range n.paths[t] {
			n.paths[t][j].typ = PathDIS
		}
	}
	return &n.paths[t][i]
}

// path returns n's path to the node of type t at index i; DIS when n reaches no
// node of that type (a malformed topology can leave a node unconnected).
func path(n *topoNode, t, i int) topoPath {
	if n.paths[t] == nil || i < 0 || i >= len(n.paths[t]) {
		return topoPath{typ: PathDIS}
	}
	return n.paths[t][i]
}

func (s *System) index(n *topoNode) int { return slices.Index(s.nodes[n.typ], n) }

// setPaths is ncclTopoSetPaths (src/graph/paths.cc): a breadth-first search from
// base that records, in every node it reaches, the path back to base. A path
// replaces another when it is shorter or new and has more bandwidth; its type is
// the worst link type on it, with a PCI switch-to-switch hop counting as PXB, a PCI
// hop touching a CPU as PHB, and NVLink through a GPU as NVB. Routing through a GPU
// is allowed only as one NVLink hop between GPUs (and not at all with NVB disabled).
func (s *System) setPaths(base *topoNode, nvbDisable bool) {
	bt, bi := base.typ, s.index(base)
	bp := s.pathTo(base, bt, bi)
	*bp = topoPath{bw: locBW, typ: PathLOC}
	list := []*topoNode{base}
	for len(list) > 0 {
		var next []*topoNode
		for _, n := range list {
			p := s.pathTo(n, bt, bi)
			for _, l := range n.links {
				rem := l.rem
				rp := s.pathTo(rem, bt, bi)
				bw := min(p.bw, l.bw)
				if n != base && n.typ == nodeGPU &&
					(nvbDisable || l.typ != linkNVL || rem.typ != nodeGPU || p.count > 1) {
					continue
				}
				if (rp.bw == 0 || rp.count > p.count) && rp.bw < bw {
					var back *topoLink
					for _, rl := range rem.links {
						if rl.rem == n && rl.typ == l.typ {
							back = rl
							break
						}
					}
					if back == nil {
						continue // NCCL fails the whole init here; a link has no reverse
					}
					rp.list = append([]*topoLink{back}, p.list...)
					rp.count = p.count + 1
					rp.bw = bw
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
					if n.typ == nodeGPU && p.typ == PathNVL && typ == PathNVL && rp.count > 1 {
						typ = PathNVB
					}
					rp.typ = max(p.typ, typ)
					if !slices.Contains(next, rem) {
						next = append(next, rem)
					}
				}
			}
		}
		list = next
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

// addInterStep is addInterStep in src/graph/paths.cc: the path from src (type t1,
// index i1) to the node of type t2 at index i2 is rerouted through the node of type
// tx at index ix.
func (s *System) addInterStep(tx, ix int, src *topoNode, t2, i2 int) {
	mid := s.nodes[tx][ix]
	if src.paths[tx] == nil || mid.paths[t2] == nil || src.paths[t2] == nil {
		return // not connected: NCCL would have failed earlier
	}
	a := &src.paths[tx][ix]
	b := &mid.paths[t2][i2]
	p := &src.paths[t2][i2]
	p.list = append(slices.Clone(a.list), b.list...)
	p.count = len(p.list)
	p.typ = mergePathType(a.typ, b.typ)
	if tx == nodeGPU {
		p.typ = PathPXN
	}
	p.bw = min(a.bw, b.bw)
}

// FormatPaths writes the path lines NCCL prints at NCCL_DEBUG=INFO with the GRAPH
// subsystem (printNodePaths in src/graph/paths.cc), one per GPU then per network
// device, without the "NCCL INFO " prefix: "GPU/0-60 :GPU/0-60 (0/5000.0/LOC) ...".
func (s *System) FormatPaths() []string {
	var out []string
	for _, t := range []int{nodeGPU, nodeNET} {
		for _, n := range s.nodes[t] {
			var b strings.Builder
			b.WriteString(n.label() + " :")
			for pt := range nodeTypes {
				if n.paths[pt] == nil {
					continue
				}
				for i, m := range s.nodes[pt] {
					p := n.paths[pt][i]
					fmt.Fprintf(&b, "%s (%d/%.1f/%s) ", m.label(), p.count, float64(p.bw), p.typ)
				}
			}
			out = append(out, b.String())
		}
	}
	return out
}
