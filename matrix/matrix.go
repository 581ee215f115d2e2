// Package matrix is the model behind `p2pcheck matrix`: which functions are devices
// of interest and in which role (GPU, NIC, NVMe controller, accelerator, p2pmem
// provider), the labels nvidia-smi topo -m gives them (GPU0, NIC0, ...), and the
// connection class of every pair. It does no I/O; render prints a Model.
package matrix

import (
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/pathclass"
	"github.com/p2pkit/p2pkit/pcie"
)

// Role is what a device of interest is to p2pcheck.
type Role int

// The roles, in the order RoleOf tests them: a function that is both (an NVIDIA
// GPU that also publishes p2pmem) takes the first.
const (
	GPU Role = iota + 1
	NIC
	NVMe
	Accelerator
	P2PMem
)

// Prefix returns the role's label prefix: "GPU" and "NIC" as nvidia-smi topo -m
// prints them, and "NVME", "ACC", "MEM" for the roles nvidia-smi does not show.
func (r Role) Prefix() string {
	switch r {
	case GPU:
		return "GPU"
	case NIC:
		return "NIC"
	case NVMe:
		return "NVME"
	case Accelerator:
		return "ACC"
	case P2PMem:
		return "MEM"
	}
	return "?"
}

// String returns the role in words: "gpu", "nic", "nvme", "accelerator", "p2pmem".
func (r Role) String() string {
	switch r {
	case GPU:
		return "gpu"
	case NIC:
		return "nic"
	case NVMe:
		return "nvme"
	case Accelerator:
		return "accelerator"
	case P2PMem:
		return "p2pmem"
	}
	return "none"
}

// MarshalText writes String, so JSON carries the role in words.
func (r Role) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// RoleOf returns d's role, or false when d is not a device of interest: GPUs
// (pcie.Device.IsGPU), Ethernet and InfiniBand controllers, NVMe controllers,
// processing accelerators and p2pmem providers. VFs are not devices of interest:
// they follow their PF's verdicts.
func RoleOf(d *pcie.Device) (Role, bool) {
	switch {
	case d.IsVF():
		return 0, false
	case d.IsGPU():
		return GPU, true
	case d.IsNIC():
		return NIC, true
	case d.IsNVMe():
		return NVMe, true
	case d.IsAccelerator():
		return Accelerator, true
	case d.P2PMem != nil:
		return P2PMem, true
	}
	return 0, false
}

// Entry is one labelled device of interest.
type Entry struct {
	Label  string // GPU0, NIC1, NVME0, ...
	Role   Role
	Device *pcie.Device
}

// Label picks the devices of interest among devs and labels them per role in the
// order given (address order numbers GPUs as nvidia-smi does): GPU0, GPU1, NIC0...
func Label(devs []*pcie.Device) []Entry {
	var out []Entry
	counts := map[Role]int{}
	for _, d := range devs {
		r, ok := RoleOf(d)
		if !ok {
			continue
		}
		out = append(out, Entry{Label: r.Prefix() + strconv.Itoa(counts[r]), Role: r, Device: d})
		counts[r]++
	}
	return out
}

// Find returns the entry whose label is name, compared case-insensitively ("gpu0",
// "NIC1"), or false.
func Find(entries []Entry, name string) (Entry, bool) {
	for _, e := range entries {
		if strings.EqualFold(e.Label, name) {
			return e, true
		}
	}
	return Entry{}, false
}

// MaxGrid is the number of devices the grid has rows and columns for. nvidia-smi
// prints a grid of every device, but a crafted snapshot (or an unusual machine)
// can hold thousands: the grid then covers the first MaxGrid devices, and
// Model.Pairs counts every pair by class. No node built today comes near: an
// eight-GPU HGX node has about 30 devices of interest.
const MaxGrid = 128

// Model is an nvidia-smi topo -m style grid. Its memory is linear in the devices:
// cells are classed when asked for.
type Model struct {
	Entries []Entry
	// CPUAffinity and NUMAAffinity per entry: local_cpulist and numa_node, "N/A"
	// when unknown.
	CPUAffinity, NUMAAffinity []string
	// NVLink reports whether NVLink counts were known (NVML was asked), so NV#
	// cells may appear.
	NVLink bool
	// Grid is the number of entries the grid covers: all of them, or the first
	// MaxGrid.
	Grid int
	// Pairs counts the unordered pairs of distinct entries, all of them, by the
	// text of their cell ("PIX", "NV18", ...).
	Pairs map[string]int

	classes *pathclass.Classes
	nvlinks func(a, b *pcie.Device) int
}

// Build labels the devices of interest among devs (every function of a topology)
// and counts their pairs by class. nvlinks gives the number of NVLinks joining two
// GPUs; nil means NVLink is not known, and no cell is NV#.
//
// Counting takes work linear in the devices (pathclass.Classes.PairCounts), except
// with NVLink known, when every pair of GPUs is asked for its NVLinks.
func Build(devs []*pcie.Device, nvlinks func(a, b *pcie.Device) int) Model {
	m := Model{Entries: Label(devs), NVLink: nvlinks != nil, classes: pathclass.NewClasses(devs), nvlinks: nvlinks}
	m.Grid = min(len(m.Entries), MaxGrid)
	ends := make([]*pcie.Device, len(m.Entries))
	for i, e := range m.Entries {
		ends[i] = e.Device
		m.CPUAffinity = append(m.CPUAffinity, orNA(e.Device.LocalCPUList))
		m.NUMAAffinity = append(m.NUMAAffinity, numaText(e.Device))
	}
	m.Pairs = map[string]int{}
	for c, n := range m.classes.PairCounts(ends) {
		m.Pairs[c.String()] += n
	}
	if nvlinks != nil {
		// An NVLink pair shows NV# instead of its PCIe class.
		var gpus []*pcie.Device
		for _, e := range m.Entries {
			if e.Role == GPU {
				gpus = append(gpus, e.Device)
			}
		}
		for i, a := range gpus {
			for _, b := range gpus[i+1:] {
				if nv := nvlinks(a, b); nv > 0 {
					pci := m.classes.NVSMI(a, b, 0).String()
					if m.Pairs[pci]--; m.Pairs[pci] == 0 {
						delete(m.Pairs, pci)
					}
					m.Pairs[pathclass.Result{Class: pathclass.NV, NVLinks: nv}.String()]++
				}
			}
		}
	}
	return m
}

// Cell returns the class between entries i and j ("X" on the diagonal): NV# with
// NVLinks, else PIX, PXB, PHB, NODE or SYS (pathclass.NVSMI). A Model not made by
// Build has no NVLink counts.
func (m *Model) Cell(i, j int) string {
	a, b := m.Entries[i], m.Entries[j]
	nv := 0
	if m.nvlinks != nil && i != j && a.Role == GPU && b.Role == GPU {
		nv = m.nvlinks(a.Device, b.Device)
	}
	if m.classes == nil {
		return pathclass.NVSMI(a.Device, b.Device, nv).String()
	}
	return m.classes.NVSMI(a.Device, b.Device, nv).String()
}

// numaText is the NUMA node, or "N/A" when unknown or -1 (no node given by the
// firmware), as nvidia-smi prints it.
func numaText(d *pcie.Device) string {
	if d.NUMANode == nil || *d.NUMANode < 0 {
		return "N/A"
	}
	return strconv.Itoa(*d.NUMANode)
}

func orNA(s string) string {
	if s == "" {
		return "N/A"
	}
	return s
}
