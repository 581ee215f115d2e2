package pathclass

import (
	"github.com/p2pkit/p2pkit/internal/forest"
	"github.com/p2pkit/p2pkit/pcie"
)

// Classes gives NVSMI's and NCCL's class for many pairs of one topology's functions,
// each in O(log depth) steps without allocating, where the functions themselves walk
// both chains (O(depth²) for a pair). NewClasses builds NCCL's tree of the functions
// (see ncclChain: a function's parent is the function two levels up) once, with
// lowest-common-ancestor tables over it and, per function, how many of the nodes
// from its root down to it ncclTopoFlattenBcmSwitches keeps. The results are those
// of NVSMI and NCCL for every pair (TestClassesRandom compares them on random trees).
// A Classes is safe for concurrent use.
type Classes struct {
	devs  []*pcie.Device // the topology's, in its order
	index map[*pcie.Device]int32
	tree  *forest.Forest
	// kept[x] counts the nodes from x's root in NCCL's tree down to x, x included,
	// that flattening keeps: every node but a Broadcom sub-switch merged into the
	// switch above it.
	kept []int32
	// nearestKept[x] is x when flattening keeps it, else its nearest ancestor that
	// it keeps (a root is always kept).
	nearestKept []int32
}

// NewClasses prepares Classes for devs, the functions of a topology (all of them:
// a function above one of devs that is not among them ends NCCL's tree there).
// Other functions are classed by NVSMI and NCCL themselves.
func NewClasses(devs []*pcie.Device) *Classes {
	c := &Classes{devs: devs, index: make(map[*pcie.Device]int32, len(devs))}
	for i, d := range devs {
		c.index[d] = int32(i)
	}
	parent := make([]int32, len(devs))
	for i, d := range devs {
		parent[i] = -1
		if p := ncclParent(d); p != nil {
			if j, ok := c.index[p]; ok {
				parent[i] = j
			}
		}
	}
	c.tree = forest.New(parent)
	c.kept = make([]int32, len(devs))
	c.nearestKept = make([]int32, len(devs))
	absorbed := make([]bool, len(devs))
	for _, x := range c.tree.TopDown() { // parents first
		p := c.tree.Parent(x)
		if p < 0 {
			c.kept[x], c.nearestKept[x] = 1, x
			continue
		}
		// As in ncclChain: a sub-switch is merged into the switch above it unless
		// that switch was merged itself.
		g := bcmGen(devs[x], 1)
		absorbed[x] = !absorbed[p] && g != 0 && bcmGen(devs[p], 0) == g
		if absorbed[x] {
			c.kept[x], c.nearestKept[x] = c.kept[p], c.nearestKept[p]
		} else {
			c.kept[x], c.nearestKept[x] = c.kept[p]+1, x
		}
	}
	return c
}

// ncclParent is d's parent in NCCL's tree: the function two levels up, when both
// levels are functions in NCCL's BDF form (see ncclChain); nil at a root.
func ncclParent(d *pcie.Device) *pcie.Device {
	p1 := d.Upstream()
	if p1 == nil || !ncclBDF(p1) {
		return nil
	}
	p2 := p1.Upstream()
	if p2 == nil || !ncclBDF(p2) {
		return nil
	}
	return p2
}

// nodes returns the indices of a and b, ok false when either is not a function of
// the topology or lies deeper in NCCL's tree than ncclChain walks.
func (c *Classes) nodes(a, b *pcie.Device) (ia, ib int32, ok bool) {
	ia, okA := c.index[a]
	ib, okB := c.index[b]
	return ia, ib, okA && okB && c.tree.Depth(ia) <= maxDepth && c.tree.Depth(ib) <= maxDepth
}

// NVSMI is [NVSMI] for a and b.
func (c *Classes) NVSMI(a, b *pcie.Device, nvlinks int) Result {
	ia, ib, ok := c.nodes(a, b)
	switch {
	case !ok || a == b || nvlinks > 0 || a.HostBridge == nil || b.HostBridge == nil || a.HostBridge != b.HostBridge:
		return NVSMI(a, b, nvlinks) // no chain to walk, or not ours to speed up
	}
	if cl, ok := c.switchClass(ia, ib, false); ok {
		return Result{Class: cl}
	}
	return Result{Class: PHB}
}

// NCCL is [NCCL] for a and b.
func (c *Classes) NCCL(a, b *pcie.Device) Result {
	ia, ib, ok := c.nodes(a, b)
	if !ok || a == b {
		return NCCL(a, b)
	}
	if cl, ok := c.switchClass(ia, ib, true); ok {
		return Result{Class: cl}
	}
	same, note := sameNUMA(c.top(ia), c.top(ib))
	if same {
		return Result{Class: PHB, Note: note}
	}
	return Result{Class: SYS, Note: note}
}

// top is the root of x's tree, the node ncclChain says hangs off the CPU.
func (c *Classes) top(x int32) *pcie.Device {
	return c.devs[c.tree.Ancestor(x, c.tree.Depth(x))]
}

// switchClass is the function of the same name for nodes a and b: the nearest node
// both lists hold is their lowest common ancestor in NCCL's tree or, flattened, the
// nearest node at or above it that flattening keeps; the hops to it are counted in
// the lists each side walks.
func (c *Classes) switchClass(a, b int32, flatten bool) (Class, bool) {
	y := c.tree.LCA(a, b)
	if y < 0 {
		return Unknown, false
	}
	if flatten {
		y = c.nearestKept[y]
	}
	if c.hops(a, y, flatten)+c.hops(b, y, flatten) >= 3 {
		return PXB, true
	}
	return PIX, true
}

// hops is the position of y, an ancestor of x or x itself, in the list x's side
// walks: x, then the nodes above it (flattened: those flattening keeps).
func (c *Classes) hops(x, y int32, flatten bool) int32 {
	switch {
	case x == y:
		return 0
	case !flatten:
		return int32(c.tree.Depth(x) - c.tree.Depth(y))
	}
	return 1 + c.kept[c.tree.Parent(x)] - c.kept[y]
}

// PairCounts counts the unordered pairs of distinct functions of devs by the class
// NVSMI gives them without NVLink (nvlinks 0), with work linear in len(devs) where
// classing every pair is quadratic. It groups instead of pairing: across host
// bridges by NUMA node (NODE or SYS), below one host bridge by tree of NCCL's
// (PIX, PXB, else PHB); within a tree a pair is PIX when one function is the other's
// parent or grandparent there, or both have one parent. Functions deeper than
// ncclChain walks are classed pair by pair. devs must be distinct.
func (c *Classes) PairCounts(devs []*pcie.Device) map[Class]int {
	out := map[Class]int{}
	type hbKey struct {
		hb   *pcie.HostBridge
		numa int
	}
	type treeKey struct {
		hb   *pcie.HostBridge
		node int32 // a root of NCCL's tree, or a parent there
	}
	var known, noHB int
	perHB := map[*pcie.HostBridge]int{}
	perNUMA := map[int]int{}
	perHBNUMA := map[hbKey]int{}
	perTree := map[treeKey]int{}
	perParent := map[treeKey]int{}
	entry := map[int32]*pcie.HostBridge{} // entries of the tree, with their host bridges
	var slow []*pcie.Device
	for _, d := range devs {
		x, ok := c.index[d]
		switch {
		case d.HostBridge == nil:
			noHB++
			continue
		case !ok || c.tree.Depth(x) > maxDepth:
			slow = append(slow, d)
			continue
		}
		entry[x] = d.HostBridge
	}
	for _, d := range devs {
		x, ok := c.index[d]
		if d.HostBridge == nil || !ok || c.tree.Depth(x) > maxDepth {
			continue
		}
		known++
		numa, _ := numaOf(d)
		perHB[d.HostBridge]++
		perNUMA[numa]++
		perHBNUMA[hbKey{d.HostBridge, numa}]++
		perTree[treeKey{d.HostBridge, c.tree.Ancestor(x, c.tree.Depth(x))}]++
		p := c.tree.Parent(x)
		if p < 0 {
			continue
		}
		perParent[treeKey{d.HostBridge, p}]++
		if entry[p] == d.HostBridge {
			out[PIX]++ // the parent
		}
		if g := c.tree.Parent(p); g >= 0 && entry[g] == d.HostBridge {
			out[PIX]++ // the grandparent
		}
	}
	pairs := func(n int) int { return n * (n - 1) / 2 }
	sum := func(m map[treeKey]int) int {
		s := 0
		for _, n := range m {
			s += pairs(n)
		}
		return s
	}
	sameHB, sameTree := 0, sum(perTree)
	for _, n := range perHB {
		sameHB += pairs(n)
	}
	sameNUMA := 0
	for _, n := range perNUMA {
		sameNUMA += pairs(n)
	}
	for _, n := range perHBNUMA {
		sameNUMA -= pairs(n)
	}
	out[PIX] += sum(perParent)
	out[PXB] += sameTree - out[PIX]
	out[PHB] += sameHB - sameTree
	out[NODE] += sameNUMA
	out[SYS] += pairs(known) - sameHB - sameNUMA
	out[Unknown] += pairs(noHB) + noHB*(len(devs)-noHB)
	// The few functions too deep for the groups: with every other function, and
	// among themselves once.
	done := make(map[*pcie.Device]bool, len(slow))
	for _, a := range slow {
		done[a] = true
		for _, b := range devs {
			if b.HostBridge != nil && !done[b] {
				out[NVSMI(a, b, 0).Class]++
			}
		}
	}
	for cl, n := range out {
		if n == 0 {
			delete(out, cl)
		}
	}
	return out
}
