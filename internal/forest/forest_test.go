package forest

import (
	"math/rand/v2"
	"testing"
)

// naive answers the same queries by walking parent links one at a time, on the
// links New kept.
type naive struct{ parent []int32 }

func (n naive) depth(x int32) int {
	d := 0
	for x = n.parent[x]; x >= 0; x = n.parent[x] {
		d++
	}
	return d
}

func (n naive) lca(a, b int32) int32 {
	on := map[int32]bool{}
	for x := a; x >= 0; x = n.parent[x] {
		on[x] = true
	}
	for x := b; x >= 0; x = n.parent[x] {
		if on[x] {
			return x
		}
	}
	return -1
}

// TestForestRandom compares depths, ancestors and LCAs with a walk one link at a
// time, on random forests: shallow and bushy, long chains, and links that close
// cycles (which New cuts).
func TestForestRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		n := 1 + r.IntN(200)
		parent := make([]int32, n)
		for x := range parent {
			switch {
			case round%3 == 0 && x > 0: // a chain with branches
				parent[x] = int32(x - 1 - r.IntN(min(x, 3)))
			case r.IntN(8) == 0:
				parent[x] = -1
			default:
				parent[x] = int32(r.IntN(n + 2)) // out of range, self and cycles included
			}
		}
		f := New(parent)
		ref := naive{parent: f.up[0]}
		for x := range parent {
			if p := f.up[0][x]; p != parent[x] && p != -1 {
				t.Fatalf("round %d: node %d: parent %d, want %d or a cut", round, x, p, parent[x])
			}
			if got, want := f.Depth(int32(x)), ref.depth(int32(x)); got != want {
				t.Fatalf("round %d: Depth(%d) = %d, want %d", round, x, got, want)
			}
		}
		for range 200 {
			a, b := int32(r.IntN(n)), int32(r.IntN(n))
			if got, want := f.LCA(a, b), ref.lca(a, b); got != want {
				t.Fatalf("round %d: LCA(%d, %d) = %d, want %d", round, a, b, got, want)
			}
			k := r.IntN(f.Depth(a) + 3)
			want := a
			for range k {
				if want >= 0 {
					want = ref.parent[want]
				}
			}
			if got := f.Ancestor(a, k); got != want {
				t.Fatalf("round %d: Ancestor(%d, %d) = %d, want %d", round, a, k, got, want)
			}
		}
	}
}

// TestForestDeepChain: on a chain of 100,000 nodes the lifting tables stay
// O(n log n) and a query takes O(log n) steps; the answers are right.
func TestForestDeepChain(t *testing.T) {
	const n = 100_000
	parent := make([]int32, n)
	for x := range parent {
		parent[x] = int32(x) - 1
	}
	f := New(parent)
	if len(f.up) > 17 {
		t.Errorf("%d lifting levels for a chain of %d, want 17", len(f.up), n)
	}
	if got := f.LCA(n-1, n/2); got != n/2 {
		t.Errorf("LCA = %d, want %d", got, n/2)
	}
	if got := f.Ancestor(n-1, n-1); got != 0 {
		t.Errorf("Ancestor = %d, want 0", got)
	}
	if allocs := testing.AllocsPerRun(10, func() { f.LCA(n-1, 12345) }); allocs != 0 {
		t.Errorf("LCA allocates %v times", allocs)
	}
}

// TestForestTopDownCut: TopDown lists every node once, after its parent; Cut marks
// exactly the links New cut.
func TestForestTopDownCut(t *testing.T) {
	// 0 <- 1 <- 2, and 3 <-> 4 a cycle, 5 below 4.
	f := New([]int32{-1, 0, 1, 4, 3, 4})
	seen := map[int32]bool{}
	for _, x := range f.TopDown() {
		if p := f.Parent(x); p >= 0 && !seen[p] {
			t.Errorf("node %d comes before its parent %d", x, p)
		}
		seen[x] = true
	}
	if len(seen) != f.Len() {
		t.Errorf("TopDown lists %d of %d nodes", len(seen), f.Len())
	}
	cuts := 0
	for x := range int32(f.Len()) {
		if f.Cut(x) {
			cuts++
			if x != 3 && x != 4 {
				t.Errorf("node %d cut", x)
			}
		}
	}
	if cuts != 1 {
		t.Errorf("%d links cut, want one of the cycle's", cuts)
	}
}
