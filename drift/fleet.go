package drift

import (
	"cmp"
	"errors"
	"slices"
)

// Source is a fleet's machines, read one at a time.
type Source interface {
	// Len is the number of machines.
	Len() int
	// Name names machine i (its file name) for reports.
	Name(i int) string
	// Load reads machine i and calls f with its Summary, which is not used once f
	// returns: the caller may drop it then. An error from reading the machine is
	// returned without calling f; an error from f is returned as it is.
	Load(i int, f func(*Summary) error) error
}

// Group is the machines of one signature.
type Group struct {
	Signature Signature
	// Nodes are the indices of its machines in the Source, ascending.
	Nodes []int
	// Result is what differs from the majority: nil for the majority itself, and
	// for a group whose machine could not be read again (Err says why).
	Result *Result
	Err    string
}

// Unreadable is a machine that could not be read.
type Unreadable struct {
	Node int
	Err  string
}

// FleetResult is the grouping of a fleet.
type FleetResult struct {
	// Groups are the signatures found: the largest first (the majority, or the
	// largest group when none has more than half of the machines read), then the
	// others by size, then by their first machine.
	Groups []Group
	// Majority reports whether the first group has more than half of the machines
	// that were read.
	Majority   bool
	Unreadable []Unreadable
}

// Fleet groups the machines of src by signature and compares one machine of each
// group with one of the largest. It reads each machine once to group it, then
// the largest group's first machine once more and, while that one is loaded, the
// first machine of every other group: at most two Summaries exist at a time,
// whatever the size of the fleet, and what it keeps per machine is its index in
// its group.
func Fleet(src Source) *FleetResult {
	res := &FleetResult{}
	bySig := map[Signature]int{}
	for i := range src.Len() {
		err := src.Load(i, func(s *Summary) error {
			g := s.Signature()
			k, ok := bySig[g]
			if !ok {
				k = len(res.Groups)
				bySig[g] = k
				res.Groups = append(res.Groups, Group{Signature: g})
			}
			res.Groups[k].Nodes = append(res.Groups[k].Nodes, i)
			return nil
		})
		if err != nil {
			res.Unreadable = append(res.Unreadable, Unreadable{Node: i, Err: err.Error()})
		}
	}
	if len(res.Groups) == 0 {
		return res
	}
	slices.SortStableFunc(res.Groups, func(a, b Group) int {
		return cmp.Or(cmp.Compare(len(b.Nodes), len(a.Nodes)), cmp.Compare(a.Nodes[0], b.Nodes[0]))
	})
	read := src.Len() - len(res.Unreadable)
	res.Majority = 2*len(res.Groups[0].Nodes) > read
	if len(res.Groups) == 1 {
		return res
	}
	err := loadAny(src, res.Groups[0], func(ref *Summary) error {
		for k := 1; k < len(res.Groups); k++ {
			g := &res.Groups[k]
			err := loadAny(src, *g, func(s *Summary) error {
				r := Compare(ref, s)
				g.Result = &r
				return nil
			})
			if err != nil {
				g.Err = err.Error()
			}
		}
		return nil
	})
	if err != nil {
		for k := 1; k < len(res.Groups); k++ {
			res.Groups[k].Err = "the majority's machines could not be read again: " + err.Error()
		}
	}
	return res
}

// errChanged is a machine whose signature is not the one it had when grouped.
var errChanged = errors.New("drift: the machine changed since it was first read")

// loadAny loads the first machine of g that can be read again with the same
// signature (files may change between the passes) and calls f with it.
func loadAny(src Source, g Group, f func(*Summary) error) error {
	var err error
	for _, i := range g.Nodes {
		called := false
		err = src.Load(i, func(s *Summary) error {
			if s.Signature() != g.Signature {
				return errChanged
			}
			called = true
			return f(s)
		})
		if err == nil || called {
			return err
		}
	}
	return err
}
