package p2pdma

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/pcie"
)

// kinds is what Twins promises twins share of a verdict: its map type, its ACS
// redirect list and fix, and the kinds of its unknowns (each once).
type kinds struct {
	MapType  MapType
	Redirect []pcie.Address
	Fix      []pcie.Address
	Unknowns []UnknownKind
}

func kindsOf(v Verdict) kinds {
	k := kinds{MapType: v.MapType, Redirect: v.ACSRedirect}
	if v.Fix != nil {
		k.Fix = v.Fix.Bridges
	}
	for _, u := range v.Unknowns {
		if !slices.Contains(k.Unknowns, u.Kind) {
			k.Unknowns = append(k.Unknowns, u.Kind)
		}
	}
	slices.Sort(k.Unknowns)
	return k
}

// TestTwins: on random trees (and deep chains) with gaps and functions below
// endpoints, for devices a random subset of the functions, twins give every partner
// the same kinds of verdict both ways, and pairs of twins agree among themselves;
// and the partition is not trivial.
func TestTwins(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 32))
	merged := 0
	for i := range 400 {
		topo := randomTree(t, r)
		if i%40 == 0 {
			topo = deepTree(t, r, 100+r.IntN(200))
		}
		for _, d := range topo.Devices {
			switch r.IntN(24) {
			case 0:
				d.PathIncomplete = true
			case 1:
				d.BelowEndpoint = true
			case 2, 3:
				unread(d)
			}
		}
		var devs []*pcie.Device
		for _, d := range topo.Devices {
			if r.IntN(2) == 0 {
				devs = append(devs, d)
			}
		}
		calc := NewCalculator(topo, intel)
		class := calc.Twins(devs)
		verdict := func(p, q *pcie.Device) kinds { return kindsOf(calc.CheckComplete(calc.Calc(p, q), p, q)) }
		members := map[int32][]int{}
		for j, c := range class {
			members[c] = append(members[c], j)
		}
		for _, m := range members {
			merged += len(m) - 1
			x := devs[m[0]]
			for _, yi := range m[1:] {
				y := devs[yi]
				if diff := cmp.Diff(verdict(x, y), verdict(y, x)); diff != "" {
					t.Fatalf("tree %d: twins %s and %s disagree with each other (-x,y +y,x):\n%s", i, x.Address, y.Address, diff)
				}
				for _, z := range devs {
					if z == x || z == y {
						continue
					}
					if diff := cmp.Diff(verdict(x, z), verdict(y, z)); diff != "" {
						t.Fatalf("tree %d: twins %s and %s, partner %s (-x +y):\n%s", i, x.Address, y.Address, z.Address, diff)
					}
					if diff := cmp.Diff(verdict(z, x), verdict(z, y)); diff != "" {
						t.Fatalf("tree %d: partner %s, twins %s and %s (-x +y):\n%s", i, z.Address, x.Address, y.Address, diff)
					}
				}
			}
			// Every pair within the class is alike.
			if len(m) > 2 {
				a, b, c := devs[m[0]], devs[m[1]], devs[m[2]]
				if diff := cmp.Diff(verdict(a, b), verdict(b, c)); diff != "" {
					t.Fatalf("tree %d: pairs within the class of %s differ:\n%s", i, a.Address, diff)
				}
			}
		}
	}
	if merged == 0 {
		t.Error("no two functions were twins: the test proves nothing")
	}
}

// TestBrief: Brief is Calc with only the first unread function of the path among
// its unknowns.
func TestBrief(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	shortened := 0
	for range 100 {
		topo := randomTree(t, r)
		for _, d := range topo.Devices {
			if r.IntN(3) == 0 {
				unread(d)
			}
		}
		calc := NewCalculator(topo, intel)
		for _, p := range topo.Devices {
			for _, q := range topo.Devices {
				full, brief := calc.Calc(p, q), calc.Brief(p, q)
				want := full
				want.Unknowns = nil
				seen := false
				for _, u := range full.Unknowns {
					if u.Kind == ACSUnread {
						if seen {
							shortened++
							continue
						}
						seen = true
					}
					want.Unknowns = append(want.Unknowns, u)
				}
				if diff := cmp.Diff(want, brief); diff != "" {
					t.Fatalf("%s -> %s (-want +Brief):\n%s", p.Address, q.Address, diff)
				}
			}
		}
	}
	if shortened == 0 {
		t.Error("no verdict had two unread functions: the test proves nothing")
	}
}
