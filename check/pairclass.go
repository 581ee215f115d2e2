package check

import (
	"container/heap"
	"iter"
	"slices"
)

// The checks that judge every pair of interest (p2p_reachability, acs_path,
// iommu_mode) would do work quadratic in the devices of interest: a node of 8,000
// GPUs has 32 million pairs. They judge classes instead. Devices that every
// judgement of a pair treats alike form a class (pairClass): twins as the kernel's
// verdicts see them (p2pdma.Calculator.Twins) with one role, and each GPU that
// NVML knows alone. Two classes make
// pairs that all come out the same, so one pair stands for them all (classPairs),
// and the pairs a check lists one by one, the first maxPairLines of each list,
// are visited in order among the classes whose pairs make lines (pairsAmong). A
// flat tree of thousands of GPUs is one class; the work is quadratic in the
// number of classes, which is the devices only where each sits below a bridge of
// its own that redirects or whose ACS was not read.

// pairClass is a class of devices of interest, f.devices[members[k]], in order.
type pairClass struct {
	id      int
	role    role
	members []int // ascending
}

// pairClasses returns the classes of f.devices, made on first use, in order of
// their first members.
func (f *Facts) pairClasses() []*pairClass {
	f.classOnce.Do(func() {
		twin := f.calc.Twins(f.devices)
		// A GPU NVML knows is a class of its own: whether it talks to another GPU
		// over NVLink (acs_path) is a fact of each pair.
		f.classes = groupClasses(len(f.devices), func(i int) [3]int {
			own := -1
			if f.devices[i].IsGPU() && f.nvmlGPU(f.devices[i].Address) != nil {
				own = i
			}
			return [3]int{int(twin[i]), int(f.roles[i]), own}
		}, f.roles)
	})
	return f.classes
}

// groupClasses puts devices 0..n-1 with equal keys into one class.
func groupClasses[K comparable](n int, key func(int) K, roles []role) []*pairClass {
	byKey := map[K]*pairClass{}
	var out []*pairClass
	for i := range n {
		k := key(i)
		c := byKey[k]
		if c == nil {
			c = &pairClass{id: len(out), role: roles[i]}
			byKey[k] = c
			out = append(out, c)
		}
		c.members = append(c.members, i)
	}
	return out
}

// classPair is two classes whose devices pair (role.pairsWith), a before b or the
// same: n pairs, the first of them in f.pairs() order.
type classPair struct {
	a, b  *pairClass
	n     int
	first pair
}

// classPairs yields every classPair of cs once.
func (f *Facts) classPairs(cs []*pairClass) iter.Seq[classPair] {
	return func(yield func(classPair) bool) {
		for ai, a := range cs {
			for _, b := range cs[ai:] {
				if !a.role.pairsWith(b.role) {
					continue
				}
				cp := classPair{a: a, b: b}
				if a == b {
					if len(a.members) < 2 {
						continue
					}
					cp.n = len(a.members) * (len(a.members) - 1) / 2
					cp.first = f.pairAt(a.members[0], a.members[1])
				} else {
					cp.n = len(a.members) * len(b.members)
					cp.first = f.pairAt(min(a.members[0], b.members[0]), max(a.members[0], b.members[0]))
				}
				if !yield(cp) {
					return
				}
			}
		}
	}
}

// pairAt is the pair of f.devices[i] and f.devices[j], i < j.
func (f *Facts) pairAt(i, j int) pair {
	return pair{a: f.devices[i], b: f.devices[j], ra: f.roles[i], rb: f.roles[j], i: i, j: j}
}

// before reports whether p comes before q in f.pairs() order.
func (p pair) before(q pair) bool { return p.i < q.i || p.i == q.i && p.j < q.j }

// pairsAmong yields, in f.pairs() order, the pairs of the classes of cs for which
// want is true, asked once per device and class that follows it (so it may change
// its mind as lists fill up), and stops when done reports true, asked once per
// device.
func (f *Facts) pairsAmong(cs []*pairClass, want func(a, b *pairClass) bool, done func() bool) iter.Seq[pair] {
	classOf := make([]*pairClass, len(f.devices))
	for _, c := range cs {
		for _, i := range c.members {
			classOf[i] = c
		}
	}
	return func(yield func(pair) bool) {
		var h cursors
		for i := range f.devices {
			if done() {
				return
			}
			ci := classOf[i]
			h = h[:0]
			for _, c := range cs {
				if !ci.role.pairsWith(c.role) || c.members[len(c.members)-1] <= i || !want(ci, c) {
					continue
				}
				k, _ := slices.BinarySearch(c.members, i+1)
				h = append(h, cursor{c.members[k:]})
			}
			heap.Init(&h)
			for len(h) > 0 {
				j := h[0].members[0]
				if !yield(f.pairAt(i, j)) {
					return
				}
				if h[0].members = h[0].members[1:]; len(h[0].members) == 0 {
					heap.Pop(&h)
				} else {
					heap.Fix(&h, 0)
				}
			}
		}
	}
}

// cursors is a heap of the members of classes still to visit, by the next one.
type cursor struct{ members []int }

type cursors []cursor

func (h cursors) Len() int           { return len(h) }
func (h cursors) Less(i, j int) bool { return h[i].members[0] < h[j].members[0] }
func (h cursors) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *cursors) Push(x any)        { *h = append(*h, x.(cursor)) }
func (h *cursors) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
