// Package gpu gathers optional NVIDIA GPU facts through NVML (go-nvml): BAR1
// size, NVLinks, the driver's P2P verdicts and topology levels for every GPU
// pair, and confidential-computing state.
//
// NVML is optional. go-nvml loads libnvidia-ml.so.1 with dlopen inside
// nvml.Init, and calling any other NVML function after a failed Init kills the
// process, so [Probe] calls nothing else unless Init succeeded. Without the
// library (or without cgo) Probe returns an error wrapping [ErrNoNVML], and
// callers carry on without GPU facts.
//
// Every call after Init is optional: a failure is recorded in the Unknown map
// of the Facts, GPU or Pair it belongs to, and the field stays unset (nil or
// empty). One failing GPU never empties the report.
package gpu

import (
	"errors"
	"fmt"
	"time"

	"github.com/p2pkit/p2pkit/pcie"
)

// ErrNoNVML means NVML cannot be used here: no libnvidia-ml.so.1, no driver,
// or a build without cgo.
var ErrNoNVML = errors.New("gpu: NVML not available")

// Facts is what NVML says about the machine's GPUs.
type Facts struct {
	// DriverVersion is the NVIDIA driver version, e.g. "580.159.04".
	DriverVersion string `json:"driver_version,omitempty"`
	// CUDADriverVersion is the CUDA version the driver supports, as
	// 1000*major + 10*minor (13000 for 13.0); 0 when unknown.
	CUDADriverVersion int `json:"cuda_driver_version,omitempty"`
	// ConfCompute is the confidential-computing state; nil when unknown.
	ConfCompute *ConfCompute `json:"conf_compute,omitempty"`
	// GPUs in NVML index order.
	GPUs []GPU `json:"gpus"`
	// Pairs holds every ordered pair of distinct GPUs, in (A, B) order.
	Pairs []Pair `json:"pairs"`
	// Unknown maps the system-wide fields NVML could not provide to why.
	Unknown map[string]string `json:"unknown,omitempty"`
	// Timing is how long the probe took.
	Timing Timing `json:"timing"`
}

// Timing records the cost of asking NVML.
type Timing struct {
	// Init is the time nvml.Init took (loading the library and attaching to
	// the driver); the bulk of a probe on an idle driver.
	Init time.Duration `json:"init_ns"`
	// Total covers Init, every query and Shutdown.
	Total time.Duration `json:"total_ns"`
}

// ConfCompute is the system's confidential-computing state
// (nvmlSystemGetConfComputeState).
type ConfCompute struct {
	// Supported is false when NVML reports the query as not supported, which
	// drivers and GPUs without CC do; the other fields are then zero.
	Supported bool `json:"supported"`
	// Enabled reports CC_SYSTEM_FEATURE_ENABLED.
	Enabled bool `json:"enabled"`
	// Environment is "unavailable", "sim" or "prod".
	Environment string `json:"environment,omitempty"`
	// DevTools reports CC developer-tools mode.
	DevTools bool `json:"devtools"`
}

// GPU is one device as NVML sees it.
type GPU struct {
	Index int    `json:"index"`
	UUID  string `json:"uuid,omitempty"`
	Name  string `json:"name,omitempty"`
	// Address is the PCI address in canonical form (NVML spells the domain
	// with 8 digits); nil when unknown.
	Address *pcie.Address `json:"bus_id,omitempty"`
	// BAR1Total and BAR1Used are the BAR1 aperture size and use in bytes
	// (nvmlDeviceGetBAR1MemoryInfo).
	BAR1Total *uint64 `json:"bar1_total,omitempty"`
	BAR1Used  *uint64 `json:"bar1_used,omitempty"`
	// MemoryTotal is the framebuffer size in bytes.
	MemoryTotal *uint64 `json:"memory_total,omitempty"`
	// Persistence reports persistence mode.
	Persistence *bool `json:"persistence,omitempty"`
	// NVLink is nil when unknown; it has no links on PCIe-only GPUs.
	NVLink *NVLink `json:"nvlink,omitempty"`
	// Unknown maps the fields NVML could not provide to why.
	Unknown map[string]string `json:"unknown,omitempty"`
}

// NVLink lists a GPU's active NVLinks.
type NVLink struct {
	Active int          `json:"active"`
	Links  []NVLinkPeer `json:"links,omitempty"`
}

// NVLinkPeer is the far end of one active link.
type NVLinkPeer struct {
	Link int `json:"link"`
	// Remote is the PCI address of the device at the far end (a GPU, or an
	// NVSwitch); nil when unknown or not on this machine's PCI tree (NVML
	// then says FFFFFFFF:FF:FF.0, as for the NVSwitches of an H200 VM).
	Remote *pcie.Address `json:"remote,omitempty"`
	// RemoteType is "gpu", "switch", "ibmnpu" or "unknown".
	RemoteType string `json:"remote_type,omitempty"`
}

// Pair is what the driver says about GPU A reaching GPU B.
type Pair struct {
	A int `json:"a"`
	B int `json:"b"`
	// CommonAncestor is the PCIe level of the closest common ancestor
	// (nvmlDeviceGetTopologyCommonAncestor); nil when unknown.
	CommonAncestor *TopologyLevel `json:"common_ancestor,omitempty"`
	// P2P is nvmlDeviceGetP2PStatus per capability.
	P2P P2PCaps `json:"p2p"`
	// Unknown maps the fields NVML could not provide to why.
	Unknown map[string]string `json:"unknown,omitempty"`
}

// P2PCaps is the P2P status per capability index; nil when unknown.
type P2PCaps struct {
	Read    *P2PStatus `json:"read,omitempty"`
	Write   *P2PStatus `json:"write,omitempty"`
	NVLink  *P2PStatus `json:"nvlink,omitempty"`
	Atomics *P2PStatus `json:"atomics,omitempty"`
	// Prop is capability index 4 (PROP, renamed PCI in newer headers).
	Prop *P2PStatus `json:"prop,omitempty"`
}

// TopologyLevel is an nvmlGpuTopologyLevel_t.
type TopologyLevel int

// Topology levels, with the nvidia-smi topo -m label each maps to.
const (
	TopologyInternal   TopologyLevel = 0  // same board (no nvidia-smi label; "PSB" here)
	TopologySingle     TopologyLevel = 10 // PIX
	TopologyMultiple   TopologyLevel = 20 // PXB
	TopologyHostBridge TopologyLevel = 30 // PHB
	TopologyNode       TopologyLevel = 40 // NODE
	TopologySystem     TopologyLevel = 50 // SYS
)

// String returns the nvidia-smi topo -m label.
func (l TopologyLevel) String() string {
	switch l {
	case TopologyInternal:
		return "PSB"
	case TopologySingle:
		return "PIX"
	case TopologyMultiple:
		return "PXB"
	case TopologyHostBridge:
		return "PHB"
	case TopologyNode:
		return "NODE"
	case TopologySystem:
		return "SYS"
	}
	return fmt.Sprintf("level(%d)", int(l))
}

// MarshalText returns the label.
func (l TopologyLevel) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText parses a label MarshalText wrote, so that Facts recorded in a
// snapshot read back as they were.
func (l *TopologyLevel) UnmarshalText(b []byte) error {
	for _, v := range []TopologyLevel{TopologyInternal, TopologySingle, TopologyMultiple, TopologyHostBridge, TopologyNode, TopologySystem} {
		if string(b) == v.String() {
			*l = v
			return nil
		}
	}
	var n int
	if _, err := fmt.Sscanf(string(b), "level(%d)", &n); err != nil || TopologyLevel(n).String() != string(b) {
		return fmt.Errorf("gpu: unknown topology level %q", b)
	}
	*l = TopologyLevel(n)
	return nil
}

// P2PStatus is an nvmlGpuP2PStatus_t.
type P2PStatus int

// P2P status values, with nvidia-smi topo -p2p codes.
const (
	P2POK                   P2PStatus = 0 // OK
	P2PChipsetNotSupported  P2PStatus = 1 // CNS
	P2PGPUNotSupported      P2PStatus = 2 // GNS
	P2PTopologyNotSupported P2PStatus = 3 // TNS
	P2PDisabledByRegkey     P2PStatus = 4 // DR
	P2PNotSupported         P2PStatus = 5 // NS
	P2PUnknown              P2PStatus = 6 // U
)

// String returns the nvidia-smi topo -p2p code.
func (s P2PStatus) String() string {
	switch s {
	case P2POK:
		return "OK"
	case P2PChipsetNotSupported:
		return "CNS"
	case P2PGPUNotSupported:
		return "GNS"
	case P2PTopologyNotSupported:
		return "TNS"
	case P2PDisabledByRegkey:
		return "DR"
	case P2PNotSupported:
		return "NS"
	}
	return "U"
}

// MarshalText returns the nvidia-smi code.
func (s P2PStatus) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses a code MarshalText wrote. "U" reads back as P2PUnknown,
// which every value without a code of its own is written as.
func (s *P2PStatus) UnmarshalText(b []byte) error {
	for v := P2POK; v <= P2PUnknown; v++ {
		if string(b) == v.String() {
			*s = v
			return nil
		}
	}
	return fmt.Errorf("gpu: unknown P2P status %q", b)
}
