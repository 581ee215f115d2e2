package render

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/p2pkit/p2pkit/matrix"
	"github.com/p2pkit/p2pkit/pathclass"
	"github.com/p2pkit/p2pkit/pcie"
)

// MatrixText writes the grid, then the device legend and the class legend.
func MatrixText(w io.Writer, m matrix.Model, s Style) error {
	p := newPrinter(w)
	if len(m.Entries) == 0 {
		p.line("no GPUs, NICs, NVMe controllers or p2pmem providers found")
		return p.done()
	}
	grid := m.Entries[:m.Grid]
	width := 5
	for _, e := range grid {
		width = max(width, len(e.Label)+1)
	}
	var hdr strings.Builder
	hdr.WriteString(strings.Repeat(" ", width))
	for _, e := range grid {
		fmt.Fprintf(&hdr, "%-*s", width, e.Label)
	}
	hdr.WriteString("CPU Affinity   NUMA Affinity")
	p.line(s.bold(hdr.String()))
	for i, e := range grid {
		var row strings.Builder
		fmt.Fprintf(&row, "%-*s", width, e.Label)
		for j := range grid {
			c := m.Cell(i, j)
			row.WriteString(cellColor(fmt.Sprintf("%-*s", width, c), c, s))
		}
		fmt.Fprintf(&row, "%-15s%s", Escape(m.CPUAffinity[i]), m.NUMAAffinity[i])
		p.line(row.String())
	}
	p.line("")
	if m.Grid < len(m.Entries) {
		var total int
		var by []string
		for _, c := range pairClasses(m.Pairs) {
			total += m.Pairs[c]
			by = append(by, fmt.Sprintf("%s %d", c, m.Pairs[c]))
		}
		p.line(s.warn(fmt.Sprintf("The grid shows the first %d of %d devices; all %d pairs by class: %s.",
			m.Grid, len(m.Entries), total, strings.Join(by, ", "))))
		p.line("")
	}
	p.line("Devices:")
	for _, e := range m.Entries {
		d := e.Device
		extra := ""
		if names := append(append(append([]string{}, d.NetDevs...), d.RDMADevs...), d.NVMeDevs...); len(names) > 0 {
			extra = " (" + Escape(strings.Join(names, ", ")) + ")"
		}
		p.line(fmt.Sprintf("  %-*s %s %s%s", width, e.Label+":", d.Address, deviceTitle(d), extra))
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

// MatrixSchemaVersion is the version of schema/matrix.v1.json that MatrixJSON
// writes in "schema_version".
const MatrixSchemaVersion = "1"

// pairClasses returns the classes of pairs, nearest first (NV# by link count,
// most first), "unknown" last.
func pairClasses(pairs map[string]int) []string {
	out := make([]string, 0, len(pairs))
	for c := range pairs {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b string) int {
		ra, _ := pathclass.Parse(a)
		rb, _ := pathclass.Parse(b)
		rank := func(r pathclass.Result) int { return (int(r.Class) + 7) % 8 } // Unknown (0) last
		return cmp.Or(cmp.Compare(rank(ra), rank(rb)), cmp.Compare(rb.NVLinks, ra.NVLinks))
	})
	return out
}

// MatrixJSON writes the grid for programs: per device its label, role, address,
// class code, lspci-style name, affinities and its row of the grid (for the first
// matrix.MaxGrid devices; later ones have an empty row), then the number of devices
// the grid covers and the count of every pair by class.
func MatrixJSON(w io.Writer, m matrix.Model) error {
	type dev struct {
		Label        string       `json:"label"`
		Role         matrix.Role  `json:"role"`
		Address      pcie.Address `json:"address"`
		Class        string       `json:"class"`
		Name         string       `json:"name"`
		CPUAffinity  string       `json:"cpu_affinity"`
		NUMAAffinity string       `json:"numa_affinity"`
		Links        []string     `json:"links"`
	}
	doc := struct {
		SchemaVersion string         `json:"schema_version"`
		Devices       []dev          `json:"devices"`
		NVLink        bool           `json:"nvlink_queried"`
		GridDevices   int            `json:"grid_devices"`
		Pairs         map[string]int `json:"pairs"`
	}{SchemaVersion: MatrixSchemaVersion, Devices: []dev{}, NVLink: m.NVLink, GridDevices: m.Grid, Pairs: m.Pairs}
	for i, e := range m.Entries {
		d := e.Device
		links := []string{}
		if i < m.Grid {
			links = make([]string, m.Grid)
			for j := range links {
				links[j] = m.Cell(i, j)
			}
		}
		doc.Devices = append(doc.Devices, dev{Label: e.Label, Role: e.Role, Address: d.Address, Class: fmt.Sprintf("%06x", d.ClassCode()), Name: deviceName(d),
			CPUAffinity: m.CPUAffinity[i], NUMAAffinity: m.NUMAAffinity[i], Links: links})
	}
	if doc.Pairs == nil {
		doc.Pairs = map[string]int{}
	}
	return writeJSON(w, doc)
}
