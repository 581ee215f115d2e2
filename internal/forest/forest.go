// Package forest answers ancestor queries on a forest given by parent links: depths,
// the k-th ancestor and the lowest common ancestor of two nodes, each in O(log depth)
// steps after O(n log depth) work and memory, by binary lifting. The pure packages
// use it so that the work per pair of functions does not grow with the depth of the
// PCI tree (a crafted snapshot can chain 256 bridges).
package forest

// Forest is a forest of nodes 0..n-1. The zero value is an empty forest.
type Forest struct {
	depth []int32
	// up[k][x] is the 2^k-th ancestor of x, -1 past a root.
	up [][]int32
	// topDown holds the nodes by depth, roots first.
	topDown []int32
	// cut marks the nodes whose link closed a cycle.
	cut map[int32]bool
}

// New builds the forest in which parent[x] is the parent of node x, -1 for a root.
// A parent out of range makes x a root. A link that closes a cycle is cut (the
// node that closes it becomes a root), so every walk up ends; callers pass forests.
func New(parent []int32) *Forest {
	n := len(parent)
	f := &Forest{depth: make([]int32, n)}
	par := make([]int32, n)
	for x, p := range parent {
		if p < 0 || int(p) >= n {
			p = -1
		}
		par[x] = p
	}
	maxDepth := f.fillDepths(par)
	f.cut = map[int32]bool{}
	for x, p := range parent {
		if p >= 0 && int(p) < n && par[x] < 0 {
			f.cut[int32(x)] = true
		}
	}
	// Nodes by depth: count each depth, then place.
	start := make([]int32, maxDepth+2)
	for _, d := range f.depth {
		start[d+1]++
	}
	for d := 1; d < len(start); d++ {
		start[d] += start[d-1]
	}
	f.topDown = make([]int32, n)
	for x, d := range f.depth {
		f.topDown[start[d]] = int32(x)
		start[d]++
	}
	levels := 1
	for 1<<levels <= maxDepth {
		levels++
	}
	f.up = make([][]int32, levels)
	f.up[0] = par
	for k := 1; k < levels; k++ {
		prev, cur := f.up[k-1], make([]int32, n)
		for x := range cur {
			if m := prev[x]; m >= 0 {
				cur[x] = prev[m]
			} else {
				cur[x] = -1
			}
		}
		f.up[k] = cur
	}
	return f
}

// fillDepths sets every node's depth, visiting each once, cutting the links that
// close cycles in par, and returns the largest depth.
func (f *Forest) fillDepths(par []int32) int {
	const unset, onWalk = -1, -2
	for x := range f.depth {
		f.depth[x] = unset
	}
	maxDepth := 0
	var walk []int32
	for x := range par {
		walk = walk[:0]
		y := int32(x)
		for y >= 0 && f.depth[y] == unset {
			f.depth[y] = onWalk
			walk = append(walk, y)
			if p := par[y]; p >= 0 && f.depth[p] == onWalk {
				par[y] = -1 // closes a cycle
			}
			y = par[y]
		}
		d := int32(-1)
		if y >= 0 {
			d = f.depth[y]
		}
		for i := len(walk) - 1; i >= 0; i-- {
			d++
			f.depth[walk[i]] = d
		}
		maxDepth = max(maxDepth, int(d))
	}
	return maxDepth
}

// TopDown returns the nodes in order of depth, roots first, so that every node comes
// after its parent. The slice is the Forest's own.
func (f *Forest) TopDown() []int32 { return f.topDown }

// Cut reports whether New cut x's link to its parent because it closed a cycle.
func (f *Forest) Cut(x int32) bool { return f.cut[x] }

// Len returns the number of nodes.
func (f *Forest) Len() int { return len(f.depth) }

// Depth returns the number of ancestors of x.
func (f *Forest) Depth(x int32) int { return int(f.depth[x]) }

// Parent returns the parent of x, -1 for a root.
func (f *Forest) Parent(x int32) int32 { return f.up[0][x] }

// Ancestor returns the k-th ancestor of x (x itself for k = 0), -1 when x has fewer
// than k ancestors.
func (f *Forest) Ancestor(x int32, k int) int32 {
	if k > int(f.depth[x]) {
		return -1
	}
	for i := 0; k > 0; i, k = i+1, k>>1 {
		if k&1 != 0 {
			x = f.up[i][x]
		}
	}
	return x
}

// LCA returns the lowest common ancestor of a and b (a node counts as its own
// ancestor), -1 when they are in different trees.
func (f *Forest) LCA(a, b int32) int32 {
	da, db := f.depth[a], f.depth[b]
	if da > db {
		a = f.Ancestor(a, int(da-db))
	} else if db > da {
		b = f.Ancestor(b, int(db-da))
	}
	if a == b {
		return a
	}
	for k := len(f.up) - 1; k >= 0; k-- {
		if ua, ub := f.up[k][a], f.up[k][b]; ua != ub {
			a, b = ua, ub
		}
	}
	return f.up[0][a] // -1 when both were roots of different trees
}
