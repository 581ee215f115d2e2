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
and function, with names from pci.ids, the driver, the link (current and maximum; a
degraded link is marked), ACS Control on bridges in lspci's words, the NUMA node,
the IOMMU group and the large BARs. --format json emits the full model.`,
		Example: "  p2pcheck topo\n  sudo p2pcheck topo --format json | jq '.devices[] | select(.acs.present)'\n  p2pcheck --snapshot node7.tar.gz topo",
		Args:    noArgs,
		RunE: func(*cobra.Command, []string) error {
			n, err := o.loadTree()
			if err != nil {
				return err
			}
			if o.format == "json" {
				return render.TopoJSON(o.stdout, n.Topology)
			}
			o.printWarnings(n)
			return render.TopoText(o.stdout, n.Topology, render.Style{Color: o.color()})
		},
	}
}
