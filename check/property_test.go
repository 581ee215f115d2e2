package check_test

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
)

// partial returns a copy of n in which seeded random functions lost facts as a
// reader without root, a capture missing files or a damaged file loses them:
// config cut to 64 bytes or missing, numa_node, link and AER attributes missing,
// resource lines that did not parse. The platform facts are kept.
func partial(n *node.Node, seed int64) *node.Node {
	rng := rand.New(rand.NewSource(seed))
	recs := make([]pcie.Record, len(n.Topology.Devices))
	for i, d := range n.Topology.Devices {
		r := d.Record
		switch x := rng.Float64(); {
		case x < 0.3 && len(r.Config) > 64:
			r.Config = r.Config[:64]
		case x < 0.4:
			r.Config = nil
		}
		if rng.Float64() < 0.2 {
			r.NUMANode, r.CurrentLink, r.MaxLink, r.AER = nil, pcie.Link{}, pcie.Link{}, nil
		}
		if rng.Float64() < 0.2 {
			// Line cut and every line after it did not parse (a damaged file).
			cut := rng.Intn(6)
			unread := slices.Clone(r.ResourcesUnread)
			var kept []pcie.Resource
			for _, res := range r.Resources {
				if res.Index >= cut {
					unread = append(unread, res.Index)
				} else {
					kept = append(kept, res)
				}
			}
			if !slices.Contains(unread, cut) {
				unread = append(unread, cut)
			}
			slices.Sort(unread)
			r.Resources, r.ResourcesUnread = kept, unread
		}
		recs[i] = r
	}
	c := *n
	c.Topology = pcie.NewTopology(recs)
	c.Warnings = nil
	return &c
}

// TestPartialVisibility is the property of issue 10: over every machine the
// golden tests cover, with random partial visibility, no check fails where it
// does not fail with everything visible, nor names a subject it does not name
// then, and the report never exits 0 while a check of a required capability is
// unknown.
func TestPartialVisibility(t *testing.T) {
	const seeds = 16
	run := func(n *node.Node) (map[string]check.Result, check.Report) {
		f := check.NewFacts(n, check.Inputs{Source: check.Snapshot})
		res, err := check.Run(f, nil)
		if err != nil {
			t.Fatal(err)
		}
		byID := map[string]check.Result{}
		for _, r := range res {
			byID[r.ID] = r
		}
		return byID, check.NewReport(f, res, testMeta)
	}
	for _, name := range machines() {
		t.Run(name, func(t *testing.T) {
			full := loadMachine(t, name)
			want, _ := run(full)
			for seed := range int64(seeds) {
				got, rep := run(partial(full, seed))
				for id, g := range got {
					if g.Status != check.Fail {
						continue
					}
					w := want[id]
					if w.Status != check.Fail {
						t.Errorf("seed %d: %s fails (%q) under partial visibility but is %s with everything visible", seed, id, g.Summary, w.Status)
						continue
					}
					for _, s := range g.Subjects {
						if !slices.Contains(w.Subjects, s) {
							t.Errorf("seed %d: %s fails on %s under partial visibility, not with everything visible (%v)", seed, id, s, w.Subjects)
						}
					}
				}
				for _, c := range rep.Checks {
					if c.Status != check.Unknown || !concerns(c, rep.Requirements) {
						continue
					}
					if rep.ExitCode == check.ExitPass || rep.Overall == check.Pass || rep.Overall == check.Warn {
						t.Errorf("seed %d: %s is unknown but the report says %s, exit %d", seed, c.ID, rep.Overall, rep.ExitCode)
					}
				}
			}
		})
	}
}

// concerns reports whether r stands in the way of one of req.
func concerns(r check.Result, req []check.Capability) bool {
	if r.PerformanceOnly {
		return false
	}
	if len(r.Blocks) == 0 {
		return true
	}
	for _, c := range r.Blocks {
		if slices.Contains(req, c) {
			return true
		}
	}
	return false
}

// TestPartialIsPartial: the mutation loses facts on every machine with more
// than a handful of functions, or the property above tests nothing.
func TestPartialIsPartial(t *testing.T) {
	n := loadMachine(t, "dgx-h100")
	p := partial(n, 1)
	lost := 0
	for i, d := range p.Topology.Devices {
		o := n.Topology.Devices[i]
		if len(d.Record.Config) != len(o.Record.Config) || len(d.ResourcesUnread) != len(o.ResourcesUnread) || (d.NUMANode == nil) != (o.NUMANode == nil) {
			lost++
		}
	}
	if lost < len(n.Topology.Devices)/4 {
		t.Errorf("partial(dgx-h100) changed %d of %d functions", lost, len(n.Topology.Devices))
	}
}
