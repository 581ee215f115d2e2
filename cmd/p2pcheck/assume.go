package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"text/tabwriter"

	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pathclass"
	"github.com/p2pkit/p2pkit/pcie"
)

// assumedPair is one row of `pairs --assume`: the verdict under the assumptions and
// the verdict now.
type assumedPair struct {
	p2pdma.Verdict
	PathType string     `json:"path_type"`
	Now      nowVerdict `json:"now"`
	Changed  bool       `json:"changed"`
}

type nowVerdict struct {
	MapType     p2pdma.MapType `json:"map_type"`
	Distance    int            `json:"distance"`
	ACSRedirect []pcie.Address `json:"acs_redirect"`
}

// pairsAssuming prints `pairs --assume`: every pair of devs under the assumptions
// (p2pdma.Assumptions, the engine `fix` predicts with) next to its verdict now.
// Nothing is changed.
func (o *globalOptions) pairsAssuming(n *node.Node, devs []*pcie.Device, what []string) error {
	var a p2pdma.Assumptions
	for _, s := range what {
		if err := a.Set(s); err != nil {
			return usageError("--assume: %v", err)
		}
	}
	now := p2pdma.NewCalculator(n.Topology, n.P2P())
	t := a.Topology(n.Topology)
	then := p2pdma.NewCalculator(t, a.Platform(n.P2P()))
	var rows []assumedPair
	for _, p := range devs {
		for _, q := range devs {
			if p == q {
				continue
			}
			v0 := now.Calc(p, q)
			v := then.Calc(t.Device(p.Address), t.Device(q.Address))
			v.Provider, v.Client = p.Address, q.Address
			rows = append(rows, assumedPair{Verdict: v, PathType: pathclass.NVSMI(p, q, 0).String(),
				Now:     nowVerdict{MapType: v0.MapType, Distance: v0.Distance, ACSRedirect: v0.ACSRedirect},
				Changed: v0.MapType != v.MapType || v0.Distance != v.Distance || !slices.Equal(v0.ACSRedirect, v.ACSRedirect)})
		}
	}
	if o.format == "json" {
		enc := json.NewEncoder(o.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			SchemaVersion string        `json:"schema_version"`
			Assume        []string      `json:"assume"`
			Pairs         []assumedPair `json:"pairs"`
		}{"1", a.Strings(), rows})
	}
	o.printWarnings(n)
	fmt.Fprintf(o.stdout, "What if %v (nothing is changed):\n", a.Strings())
	tw := tabwriter.NewWriter(o.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tCLIENT\tNOW\tASSUMED\tPATH\tACS REDIRECT (ASSUMED)")
	changed := 0
	for _, r := range rows {
		mark := ""
		if r.Changed {
			mark, changed = "*", changed+1
		}
		fmt.Fprintf(tw, "%s\t%s\t%s %d\t%s %d%s\t%s\t%v\n", r.Provider, r.Client, r.Now.MapType, r.Now.Distance,
			r.MapType, r.Distance, mark, r.PathType, r.ACSRedirect)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(o.stdout, "%d of %d pairs change (*)\n", changed, len(rows))
	return err
}
