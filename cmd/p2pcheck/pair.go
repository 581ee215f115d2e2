package main

import (
	"github.com/spf13/cobra"

	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pathclass"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/provision"
	"github.com/p2pkit/p2pkit/render"
)

func newPairCommand(o *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "pair PROVIDER CLIENT",
		Short: "Explain one pair hop by hop: ACS on each bridge, where the path turns, verdict and fix",
		Long: `pair walks the path between two devices as the kernel does: each function from the
provider up to the common upstream bridge (or the host bridge) and down to the client,
with its port type, link and ACS Control, marking the bridges whose ACS redirect
sends peer traffic up to the root complex. It then gives the kernel's verdict and
distance, the path class, the reason and the exact fix (kernel parameter and setpci).

Devices may be named by PCI address (0000:41:00.0 or 41:00.0), by any label
'p2pcheck matrix' prints (GPU0, NIC1, NVME0, ACC0, MEM0, in any case; GPUs are
numbered as nvidia-smi numbers them), or by network interface, RDMA device or NVMe
controller name (ib0, mlx5_0, nvme1). A name that is both a label and the kernel's
name of another function (nvme1) is refused: use the address.`,
		Example: "  sudo p2pcheck pair gpu0 mlx5_0\n  sudo p2pcheck pair GPU0 NIC1\n  sudo p2pcheck pair 0000:41:00.0 0000:c1:00.0 --format json",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageError("pair: want two devices, PROVIDER and CLIENT (got %d arguments)", len(args))
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			n, err := o.load()
			if err != nil {
				return err
			}
			a, b, err := resolvePair(n, args[0], args[1])
			if err != nil {
				return err
			}
			calc := p2pdma.NewCalculator(n.Topology, n.P2P())
			r := render.PairReport{
				Path:    n.Topology.Path(a, b),
				Verdict: calc.CheckComplete(calc.Calc(a, b), a, b),
				Reverse: calc.CheckComplete(calc.Calc(b, a), b, a),
				NVSMI:   pathclass.NVSMI(a, b, 0).String(),
				NCCL:    pathclass.NCCL(a, b).String(),
			}
			if f := r.Verdict.Fix; f != nil {
				r.BootFix = bootFix(n, f.Bridges)
			}
			if o.format == "json" {
				return render.PairJSON(o.stdout, r)
			}
			o.printWarnings(n)
			return render.PairText(o.stdout, r, render.Style{Color: o.color()})
		},
	}
}

// resolvePair finds both devices; a name that matches nothing is a usage error.
func resolvePair(n *node.Node, x, y string) (a, b *pcie.Device, err error) {
	if a, err = n.Resolve(x); err != nil {
		return nil, nil, usageError("pair: %v", err)
	}
	if b, err = n.Resolve(y); err != nil {
		return nil, nil, usageError("pair: %v", err)
	}
	if a == b {
		return nil, nil, usageError("pair: %s and %s are the same function", x, y)
	}
	return a, b, nil
}

// bootFix is the boot-time fix of clearing ACS redirect on bridges for the analysed
// kernel, as `p2pcheck fix` and the report's acs_path make it.
func bootFix(n *node.Node, bridges []pcie.Address) string {
	b := provision.ClearRedirectParam(n.Topology, n.Release(), bridges)
	if b.Usable() {
		return `add the kernel parameter "` + b.Param + `"`
	}
	return "none keeps it on this kernel (" + string(b.Form) + "): " + b.Reason
}
