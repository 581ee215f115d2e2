package render

import (
	"fmt"
	"io"
	"strings"

	"github.com/p2pkit/p2pkit/pcie"
)

// Matrix is an `nvidia-smi topo -m`-style grid: a label per device, the connection
// class of every pair, and each device's CPU and NUMA affinity.
type Matrix struct {
	Labels  []string // GPU0, NIC0, NVME0, ...
	Devices []*pcie.Device
	// Cells[i][j] is the class between device i and device j ("X" on the diagonal).
	Cells [][]string
	// CPUAffinity and NUMAAffinity per device; "N/A" when unknown.
	CPUAffinity, NUMAAffinity []string
	// NVLink reports whether NV# cells may appear (NVML was asked).
	NVLink bool
}

// MatrixText writes the grid, then the device legend and the class legend.
func MatrixText(w io.Writer, m Matrix, s Style) error {
	p := newPrinter(w)
	if len(m.Labels) == 0 {
		p.line("no GPUs, NICs, NVMe controllers or p2pmem providers found")
		return p.done()
	}
	width := 5
	for _, l := range m.Labels {
		width = max(width, len(l)+1)
	}
	var hdr strings.Builder
	hdr.WriteString(strings.Repeat(" ", width))
	for _, l := range m.Labels {
		fmt.Fprintf(&hdr, "%-*s", width, l)
	}
	hdr.WriteString("CPU Affinity   NUMA Affinity")
	p.line(s.bold(hdr.String()))
	for i, l := range m.Labels {
		var row strings.Builder
		fmt.Fprintf(&row, "%-*s", width, l)
		for j := range m.Labels {
			row.WriteString(cellColor(fmt.Sprintf("%-*s", width, m.Cells[i][j]), m.Cells[i][j], s))
		}
		fmt.Fprintf(&row, "%-15s%s", m.CPUAffinity[i], m.NUMAAffinity[i])
		p.line(row.String())
	}
	p.line("")
	p.line("Devices:")
	for i, l := range m.Labels {
		d := m.Devices[i]
		extra := ""
		if names := append(append(append([]string{}, d.NetDevs...), d.RDMADevs...), d.NVMeDevs...); len(names) > 0 {
			extra = " (" + strings.Join(names, ", ") + ")"
		}
		p.line(fmt.Sprintf("  %-*s %s %s%s", width, l+":", d.Address, deviceTitle(d), extra))
	}
	p.line("")
	p.line("Legend:")
	p.line("")
	p.line("  X    = Self")
	p.line("  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)")
	p.line("  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node")
	p.line("  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)")
	p.line("  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)")
	p.line("  PIX  = Connection traversing at most a single PCIe bridge")
	if m.NVLink {
		p.line("  NV#  = Connection traversing a bonded set of # NVLinks")
	} else {
		p.line(s.dim("  (NVLink not queried: NVML unavailable or --no-nvml)"))
	}
	return p.done()
}

func cellColor(padded, class string, s Style) string {
	switch {
	case class == "PIX" || class == "PXB" || strings.HasPrefix(class, "NV"):
		return s.good(padded)
	case class == "SYS":
		return s.warn(padded)
	}
	return padded
}

// MatrixJSON writes the grid for programs.
func MatrixJSON(w io.Writer, m Matrix) error {
	type dev struct {
		Label        string       `json:"label"`
		Address      pcie.Address `json:"address"`
		Class        string       `json:"class"`
		Name         string       `json:"name,omitempty"`
		CPUAffinity  string       `json:"cpu_affinity"`
		NUMAAffinity string       `json:"numa_affinity"`
		Links        []string     `json:"links"`
	}
	doc := struct {
		Devices []dev `json:"devices"`
		NVLink  bool  `json:"nvlink_queried"`
	}{Devices: []dev{}, NVLink: m.NVLink}
	for i, l := range m.Labels {
		d := m.Devices[i]
		doc.Devices = append(doc.Devices, dev{Label: l, Address: d.Address, Class: fmt.Sprintf("%06x", d.ClassCode()), Name: deviceName(d),
			CPUAffinity: m.CPUAffinity[i], NUMAAffinity: m.NUMAAffinity[i], Links: m.Cells[i]})
	}
	return writeJSON(w, doc)
}
