package main

import (
	"github.com/spf13/cobra"

	"github.com/p2pkit/p2pkit/render"
)

func newTopoCommand(o *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "topo",
		Short: "Show the PCIe tree with links, ACS, NUMA and IOMMU groups",
		Long: `topo prints the PCIe tree like 'lspci -tv': every host bridge, root port, switch
and function, with names from pci.ids as lspci prints them, the driver, the link
(current and maximum), ACS Control on bridges in lspci's words, the NUMA node, the
IOMMU group and the large BARs. A link is marked "(downgraded)" exactly where
'lspci -vv' marks it: the function runs below its own capability (never on root
and downstream ports, whose link partner may be the limit). --format json emits
the full model (schema/topo.v1.json); --format dot a Graphviz picture of the
bridges and devices of interest, links coloured by the kernel's P2PDMA verdict
between the devices they join.`,
		Example: "  p2pcheck topo\n  sudo p2pcheck topo --format json | jq '.devices[] | select(.acs.present)'\n" +
			"  p2pcheck --snapshot node7.tar.gz topo\n  sudo p2pcheck topo --format dot | dot -Tsvg > node.svg",
		Args: noArgs,
		// --format dot is topo's alone; the other values are checked as for every
		// command.
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if o.format != "dot" {
				return o.validate()
			}
			o.format = "text"
			err := o.validate()
			o.format = "dot"
			return err
		},
		RunE: func(*cobra.Command, []string) error {
			if o.format == "dot" {
				gpus := startNVML(o.nvmlSkip(), probeNVMLLinks) // NVLinks, drawn when known
				n, err := o.load()                              // the verdicts need the platform facts
				if err != nil {
					return err
				}
				attachNVML(n, gpus)
				o.printWarnings(n)
				return render.TopoDot(o.stdout, n.Topology, n.P2P(), n.GPU)
			}
			n, err := o.loadTree()
			if err != nil {
				return err
			}
			if o.format == "json" {
				return render.TopoJSON(o.stdout, n.Topology, n.Warnings)
			}
			o.printWarnings(n)
			return render.TopoText(o.stdout, n.Topology, render.Style{Color: o.color()})
		},
	}
}
