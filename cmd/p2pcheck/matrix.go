package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/matrix"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/render"
)

func newMatrixCommand(o *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "matrix",
		Short: "Show an nvidia-smi topo -m style grid over GPUs, NICs, NVMe and p2pmem providers",
		Long: `matrix prints the connection class between every pair of GPUs, NICs, NVMe
controllers, accelerators and p2pmem providers, with the legend of
'nvidia-smi topo -m' (X, NV#, PIX, PXB, PHB, NODE, SYS) and each device's CPU and
NUMA affinity. NVLink counts come from NVML on the live machine; --no-nvml (or a
snapshot) uses sysfs and config space alone. Devices are listed by label, address
and IDs; --pci-ids FILE adds product names. With more than 128 devices the grid
shows the first 128 and counts every pair by class.`,
		Example: "  p2pcheck matrix\n  p2pcheck matrix --no-nvml --format json",
		Args:    noArgs,
		RunE: func(*cobra.Command, []string) error {
			gpus := startNVML(o.nvmlSkip(), probeNVMLLinks)
			// Like nvidia-smi, the grid names devices by label and address; product
			// names from pci.ids (a few milliseconds) only when --pci-ids asks.
			n, err := o.loadWith(node.Options{NoPlatform: true, NoNames: o.pciIDs == ""})
			if err != nil {
				return err
			}
			attachNVML(n, gpus)
			m := buildMatrix(n)
			if o.format == "json" {
				return render.MatrixJSON(o.stdout, m)
			}
			o.printWarnings(n)
			return render.MatrixText(o.stdout, m, render.Style{Color: o.color()})
		},
	}
}

// errNVMLSkipped wraps the reasons nvmlSkip gives.
var errNVMLSkipped = errors.New("NVML not queried")

// nvmlSkip says why NVML must not be asked, or nil when it may: NVML describes the
// running machine, so only without --no-nvml and on the live root.
func (o *globalOptions) nvmlSkip() error {
	switch {
	case o.noNVML:
		return fmt.Errorf("%w: --no-nvml", errNVMLSkipped)
	case o.snapshot != "":
		return fmt.Errorf("%w: a snapshot carries no NVML state", errNVMLSkipped)
	case o.root != "/" && !nvmlOnRoot:
		return fmt.Errorf("%w: it describes this machine, not the tree under --root", errNVMLSkipped)
	}
	return nil
}

// startNVML runs probe in the background unless skip says why not, and returns a
// function that waits for its result. NVML's initialisation takes tens of
// milliseconds in the driver; sysfs is read meanwhile.
func startNVML(skip error, probe func() (*gpu.Facts, error)) func() (*gpu.Facts, error) {
	if skip != nil {
		return func() (*gpu.Facts, error) { return nil, skip }
	}
	type result struct {
		f   *gpu.Facts
		err error
	}
	done := make(chan result, 1)
	go func() {
		f, err := probe()
		done <- result{f, err}
	}()
	return func() (*gpu.Facts, error) {
		r := <-done
		return r.f, r.err
	}
}

// attachNVML waits for the NVML probe started by startNVML and gives its facts to
// n; an error other than "no NVML" or a skip becomes one of n's warnings. GPUs are
// then named from NVML live, or from what a snapshot recorded.
func attachNVML(n *node.Node, gpus func() (*gpu.Facts, error)) {
	f, err := gpus()
	switch {
	case err == nil:
		n.GPU = f
	case !errors.Is(err, gpu.ErrNoNVML) && !errors.Is(err, errNVMLSkipped):
		n.Warnings = append(n.Warnings, err)
	}
	n.NameGPUs()
}

// buildMatrix is the grid of the node's devices, with NVLink counts when NVML was
// asked.
func buildMatrix(n *node.Node) matrix.Model {
	var nvlinks func(a, b *pcie.Device) int
	if n.GPU != nil {
		nvlinks = n.NVLinks
	}
	return matrix.Build(n.Topology.Devices, nvlinks)
}
