package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/p2pkit/p2pkit/internal/gpu"
	"github.com/p2pkit/p2pkit/internal/node"
	"github.com/p2pkit/p2pkit/pathclass"
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
and IDs; --pci-ids FILE adds product names.`,
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
			f, err := gpus()
			switch {
			case err == nil:
				n.GPU = f
			case !errors.Is(err, gpu.ErrNoNVML) && !errors.Is(err, errNVMLSkipped):
				n.Warnings = append(n.Warnings, err)
			}
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

// buildMatrix labels the devices of interest as nvidia-smi does (GPU0, NIC0, ...;
// NVMe and p2pmem providers and accelerators get NVME0, MEM0, ACC0) and classes
// every pair.
func buildMatrix(n *node.Node) render.Matrix {
	m := render.Matrix{NVLink: n.GPU != nil}
	counts := map[string]int{}
	for _, d := range n.Interesting() {
		kind := "MEM"
		switch {
		case d.IsGPU():
			kind = "GPU"
		case d.IsNIC():
			kind = "NIC"
		case d.IsNVMe():
			kind = "NVME"
		case d.IsAccelerator():
			kind = "ACC"
		}
		m.Labels = append(m.Labels, kind+strconv.Itoa(counts[kind]))
		counts[kind]++
		m.Devices = append(m.Devices, d)
		m.CPUAffinity = append(m.CPUAffinity, orNA(d.LocalCPUList))
		m.NUMAAffinity = append(m.NUMAAffinity, numaText(d))
	}
	m.Cells = make([][]string, len(m.Devices))
	for i, a := range m.Devices {
		m.Cells[i] = make([]string, len(m.Devices))
		for j, b := range m.Devices {
			nv := 0
			if a.IsGPU() && b.IsGPU() && i != j {
				nv = n.NVLinks(a, b)
			}
			m.Cells[i][j] = pathclass.NVSMI(a, b, nv).String()
		}
	}
	return m
}

func numaText(d *pcie.Device) string {
	if d.NUMANode == nil || *d.NUMANode < 0 {
		return "N/A"
	}
	return fmt.Sprint(*d.NUMANode)
}

func orNA(s string) string {
	if s == "" {
		return "N/A"
	}
	return s
}
