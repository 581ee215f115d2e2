// Package pathclass classifies the PCIe path between two devices the way nvidia-smi
// ("nvidia-smi topo -m", NVML's common-ancestor level) and NCCL (its path types) do.
//
// The two differ: nvidia-smi tells host bridges of one NUMA node apart (NODE) where
// NCCL, whose CPU nodes are NUMA nodes, says PHB; NCCL folds Broadcom PEX switches that
// present themselves as two levels into one. NCCL's numeric path types changed between
// releases, so classes are compared by name, never by NCCL's numbers.
//
// The package is pure: it works on a pcie.Topology's devices. NUMA nodes come from each
// device's numa_node attribute (Record.NUMANode); NVLink counts, which sysfs cannot
// show, come from the caller.
package pathclass

import (
	"fmt"
	"strconv"
	"strings"
)

// Class is a path class. Classes are ordered from nearest to farthest: X, NV, PIX,
// PXB, PHB, NODE, SYS. The zero value is Unknown.
type Class uint8

// Path classes, with the definitions of the nvidia-smi legend.
const (
	Unknown Class = iota
	// X is a device with itself (nvidia-smi "X"; NCCL's LOC).
	X
	// NV is a connection over a bonded set of NVLinks (nvidia-smi "NV#"; NCCL's NVL).
	NV
	// PIX is a connection traversing at most a single PCIe bridge (one switch).
	PIX
	// PXB is a connection traversing multiple PCIe bridges without traversing the
	// PCIe host bridge.
	PXB
	// PHB is a connection traversing PCIe as well as a PCIe host bridge (typically
	// the CPU).
	PHB
	// NODE is a connection traversing PCIe as well as the interconnect between PCIe
	// host bridges within a NUMA node. NCCL has no NODE: it says PHB.
	NODE
	// SYS is a connection traversing PCIe as well as the SMP interconnect between
	// NUMA nodes (e.g. QPI/UPI).
	SYS
)

var classNames = [...]string{Unknown: "unknown", X: "X", NV: "NV", PIX: "PIX", PXB: "PXB", PHB: "PHB", NODE: "NODE", SYS: "SYS"}

// String returns the nvidia-smi label ("X", "NV", "PIX", ...) or "unknown".
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "Class(" + strconv.Itoa(int(c)) + ")"
}

// Result is the class of one pair, with the NVLink count for NV and a note when the
// class rests on an assumption.
type Result struct {
	Class   Class
	NVLinks int // number of NVLinks between the two GPUs when Class is NV
	// Note says what the class assumes, e.g. that two host bridges whose NUMA node is
	// unknown share one node. Empty when nothing was assumed.
	Note string
}

// String returns the label as nvidia-smi prints it: "NV18" for NV, else the class.
func (r Result) String() string {
	if r.Class == NV {
		return "NV" + strconv.Itoa(r.NVLinks)
	}
	return r.Class.String()
}

// MarshalText implements encoding.TextMarshaler with the String form.
func (r Result) MarshalText() ([]byte, error) {
	if int(r.Class) >= len(classNames) {
		return nil, fmt.Errorf("pathclass: invalid class %d", r.Class)
	}
	return []byte(r.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler; see Parse.
func (r *Result) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// Parse reads a label as nvidia-smi topo -m prints it ("X", "PIX", "PXB", "PHB",
// "NODE", "SYS", "NV12") or an NCCL path type name where it has the same meaning
// ("LOC" for X, "NVL" for NV without a count). Surrounding space is ignored.
func Parse(s string) (Result, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "LOC":
		return Result{Class: X}, nil
	case "NVL":
		return Result{Class: NV}, nil
	case "unknown":
		return Result{}, nil
	}
	if n, ok := strings.CutPrefix(s, "NV"); ok && n != "" {
		links, err := strconv.Atoi(n)
		if err != nil || links <= 0 {
			return Result{}, fmt.Errorf("pathclass: invalid NVLink count in %q", s)
		}
		return Result{Class: NV, NVLinks: links}, nil
	}
	for c, name := range classNames {
		if Class(c) != Unknown && Class(c) != NV && name == s {
			return Result{Class: Class(c)}, nil
		}
	}
	return Result{}, fmt.Errorf("pathclass: unknown path class %q", s)
}

// NVMLLevel is NVML's nvmlGpuTopologyLevel_t, the value
// nvmlDeviceGetTopologyCommonAncestor returns.
type NVMLLevel int

// NVML topology levels (nvml.h).
const (
	NVMLInternal   NVMLLevel = 0  // NVML_TOPOLOGY_INTERNAL: on one board (e.g. Tesla K80)
	NVMLSingle     NVMLLevel = 10 // NVML_TOPOLOGY_SINGLE: a single PCIe switch
	NVMLMultiple   NVMLLevel = 20 // NVML_TOPOLOGY_MULTIPLE: several switches, no host bridge
	NVMLHostBridge NVMLLevel = 30 // NVML_TOPOLOGY_HOSTBRIDGE: the same host bridge
	NVMLNode       NVMLLevel = 40 // NVML_TOPOLOGY_NODE (formerly CPU): the same NUMA node
	NVMLSystem     NVMLLevel = 50 // NVML_TOPOLOGY_SYSTEM: across NUMA nodes
)

// Class returns the nvidia-smi class of an NVML level. INTERNAL has no legend entry
// in nvidia-smi; the on-board switch it stands for is a single switch, so it maps to
// PIX. ok is false for a value that is not a level.
func (l NVMLLevel) Class() (c Class, ok bool) {
	switch l {
	case NVMLInternal, NVMLSingle:
		return PIX, true
	case NVMLMultiple:
		return PXB, true
	case NVMLHostBridge:
		return PHB, true
	case NVMLNode:
		return NODE, true
	case NVMLSystem:
		return SYS, true
	}
	return Unknown, false
}

// NVMLLevel returns the NVML common-ancestor level of a PCIe class. ok is false for
// X, NV and Unknown, which are not common-ancestor levels.
func (c Class) NVMLLevel() (l NVMLLevel, ok bool) {
	switch c {
	case PIX:
		return NVMLSingle, true
	case PXB:
		return NVMLMultiple, true
	case PHB:
		return NVMLHostBridge, true
	case NODE:
		return NVMLNode, true
	case SYS:
		return NVMLSystem, true
	}
	return 0, false
}
