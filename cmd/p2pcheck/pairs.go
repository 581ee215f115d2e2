package main

import (
	"github.com/spf13/cobra"

	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pathclass"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/render"
)

func newPairsCommand(o *globalOptions) *cobra.Command {
	var all bool
	var assume []string
	cmd := &cobra.Command{
		Use:   "pairs [--all]",
		Short: "Give the kernel's P2PDMA verdict and the path class for every pair of devices",
		Long: `pairs lists every ordered (provider, client) pair of the devices of interest — GPUs,
NICs, NVMe controllers, accelerators and p2pmem providers — with the map type the
kernel's calc_map_type_and_dist() (drivers/pci/p2pdma.c) gives it:

  bus-addr          peer-to-peer below a common bridge, no ACS redirect on the way
  thru-host-bridge  allowed, but the traffic turns at the root complex
  not-supported     the kernel refuses the pair
  unknown           a fact the kernel reads could not be read (run as root)

the kernel's distance, the nvidia-smi path class (PIX, PXB, PHB, NODE, SYS) and the
bridges whose ACS redirect sends the traffic up. --all covers every ordered pair of
distinct type-0 functions, as the kernel would compute them.`,
		Example: "  sudo p2pcheck pairs\n  sudo p2pcheck pairs --all --format json | jq '.pairs[] | select(.map_type != \"bus-addr\")'",
		Args:    noArgs,
		RunE: func(*cobra.Command, []string) error {
			n, err := o.load()
			if err != nil {
				return err
			}
			devs := n.Interesting()
			if all {
				devs = n.Topology.Endpoints()
			}
			if len(assume) > 0 {
				return o.pairsAssuming(n, devs, assume)
			}
			seq := pairSeq(n, devs)
			if o.format == "json" {
				return render.PairsJSON(o.stdout, seq)
			}
			o.printWarnings(n)
			return render.PairsText(o.stdout, seq, render.Style{Color: o.color()})
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "every ordered pair of distinct type-0 functions, not only devices of interest")
	cmd.Flags().StringArrayVar(&assume, "assume", nil, "what-if: verdicts with `WHAT` assumed (acs-redirect=off|on, cpu=amd-zen|intel; repeatable) and the difference to now; changes nothing")
	return cmd
}

// pairSeq yields every ordered pair of distinct functions of devs with its verdict
// (unknown where it rests on a gap in the tree) and path class.
func pairSeq(n *node.Node, devs []*pcie.Device) func(func(render.Pair) bool) {
	calc := p2pdma.NewCalculator(n.Topology, n.P2P())
	classes := pathclass.NewClasses(n.Topology.Devices)
	return func(yield func(render.Pair) bool) {
		for e, v := range calc.AllEnds(devs) {
			v = calc.CheckComplete(v, e.Provider, e.Client)
			if !yield(render.Pair{Verdict: v, PathType: classes.NVSMI(e.Provider, e.Client, 0).String()}) {
				return
			}
		}
	}
}
