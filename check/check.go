// Package check is p2pcheck's node-readiness engine: a catalogue of checks, each a
// pure function of [Facts] that returns one [Result] with a status, the subjects it
// is about, what was observed and expected, the evidence (file or API and raw value),
// the exact remediation and references.
//
// Checks run in causal precedence, the order in which causes hide one another on a
// real node: whether devices can reach each other at all, then virtualization and
// confidential-computing policy, then firmware (IOMMU, ACS, BAR1), links, drivers,
// kernel modules and finally runtime settings and probes. A report therefore names
// one thing to fix first: the first failure, else the first unknown, else the
// first warning.
//
// What fails a node depends on what it is for: each result names the capabilities
// it blocks (Result.Blocks), and [Judge] keeps a failure only where it blocks a
// required capability ([DefaultRequirements] unless --require says otherwise).
//
// Facts are gathered at the edge (cmd/p2pcheck) and handed in; nothing here reads
// files, the environment or devices, so every check is table-tested on facts built
// from synthetic and captured machines.
package check

import (
	"fmt"
	"slices"
	"strings"
)

// Status is the outcome of a check.
type Status string

// Check statuses. Skip means the check does not apply here (no GPU, a snapshot has
// no process limits) and says why. Unknown means it applies but a fact it needs
// could not be read (config space without root, a file that did not parse); it is
// never folded into pass or skip, and a Fail never rests on an unread fact.
const (
	Pass    Status = "pass"
	Warn    Status = "warn"
	Fail    Status = "fail"
	Skip    Status = "skip"
	Unknown Status = "unknown"
	Error   Status = "error"
)

// Capability is something a node is meant to do. A failing check names the
// capabilities it blocks (Result.Blocks); whether that fails the node depends on
// which capabilities are required.
type Capability string

// Capabilities a node can be required to have.
const (
	// CapP2P: GPUs reach each other peer-to-peer (NVLink or PCIe).
	CapP2P Capability = "p2p"
	// CapGDR: GPUDirect RDMA between GPUs and RDMA NICs (nvidia-peermem or DMA-BUF).
	CapGDR Capability = "gdr"
	// CapGDRCopy: CPU mappings of GPU memory through GDRCopy.
	CapGDRCopy Capability = "gdrcopy"
	// CapNVMeP2P: NVMe and p2pmem peer-to-peer through the kernel's P2PDMA.
	CapNVMeP2P Capability = "nvme-p2p"
)

// rank orders statuses by how much they need attention.
func (s Status) rank() int {
	switch s {
	case Fail:
		return 4
	case Error, Unknown:
		return 3
	case Warn:
		return 2
	case Pass:
		return 1
	}
	return 0
}

// worse returns the status that needs more attention.
func worse(a, b Status) Status {
	if b.rank() > a.rank() {
		return b
	}
	return a
}

// Result is the outcome of one check.
type Result struct {
	// ID is the check's stable snake_case identifier.
	ID     string `json:"id"`
	Status Status `json:"status"`
	// Summary is one line for people.
	Summary string `json:"summary"`
	// Subjects are what the status is about: PCI addresses, GPU indices or UUIDs,
	// network or RDMA devices. For a failure or warning, the offending ones.
	Subjects []string `json:"subjects,omitempty"`
	Observed string   `json:"observed,omitempty"`
	Expected string   `json:"expected,omitempty"`
	// Findings are the per-subject details behind the status.
	Findings []Finding `json:"findings,omitempty"`
	// Evidence names where each fact came from with its raw value.
	Evidence []Evidence `json:"evidence,omitempty"`
	// Remediation holds the exact commands or settings that fix the problem, the
	// preferred one first. Empty for a pass.
	Remediation []string `json:"remediation,omitempty"`
	// Blocks are the capabilities a Fail or Unknown stands in the way of; empty
	// means the result concerns every capability.
	Blocks []Capability `json:"blocks,omitempty"`
	// PerformanceOnly marks a check that decides how fast a capability is, not
	// whether it works (NUMA placement, the GPU-NIC path class): its Unknown
	// concerns no capability and never counts against the node.
	PerformanceOnly bool `json:"performance_only,omitempty"`
	// Refs are the sources behind the check: its page under docs/checks,
	// kernel files, NVIDIA documents, issues.
	Refs []string `json:"refs,omitempty"`
}

// Finding is one subject's part of a result.
type Finding struct {
	Subject string `json:"subject"`
	Status  Status `json:"status"`
	Message string `json:"message"`
}

// Evidence is one fact a result rests on.
type Evidence struct {
	// Source is a file path (as on the analysed machine) or an API call.
	Source string `json:"source"`
	// Value is the raw value read there, "absent" when the file does not exist.
	Value string `json:"value"`
}

// Spec describes one check of the catalogue.
type Spec struct {
	// ID is the stable snake_case identifier results and --check use.
	ID string
	// Title says in a few words what the check looks at.
	Title string
	run   func(*Facts) Result
}

// catalogue lists every check in causal precedence.
var catalogue = []Spec{
	{"inventory", "the GPUs, RDMA NICs and NVMe controllers the node has, against --expect", checkInventory},
	{"p2p_reachability", "kernel P2PDMA verdicts for GPU, NIC and NVMe pairs", checkReachability},
	{"virtualization", "bare metal or virtual machine", checkVirtualization},
	{"confidential_computing", "GPU confidential-computing mode", checkConfCompute},
	{"iommu_mode", "IOMMU passthrough or translation", checkIOMMU},
	{"acs_path", "ACS redirect on the bridges between peers", checkACSPath},
	{"virt_host", "virtualization host: ATS, Direct Translated P2P, separate IOMMU groups", checkVirtHost},
	{"acs_drift", "ACS as fix --apply or the boot parameter set it", checkACSDrift},
	{"bar_sizes", "GPU BAR1 aperture and Resizable BAR", checkBARSizes},
	{"pcie_link", "PCIe link speed and width on peer paths", checkPCIeLink},
	{"max_payload_size", "PCIe Max Payload Size of GPU and RDMA NIC links", checkMaxPayloadSize},
	{"aer_errors", "PCIe Advanced Error Reporting", checkAER},
	{"numa_node", "NUMA affinity of GPUs and NICs", checkNUMANode},
	{"gpu_nic_affinity", "GPU to NIC path class for GPUDirect RDMA", checkGPUNICAffinity},
	{"pcie_relaxed_ordering", "PCIe Relaxed Ordering on GPUDirect RDMA paths", checkRelaxedOrdering},
	{"nvidia_driver", "NVIDIA kernel driver version and flavour", checkNVIDIADriver},
	{"nvidia_registry", "NVIDIA driver registry overrides that change P2P", checkNVIDIARegistry},
	{"nvml_p2p_status", "NVIDIA driver P2P status between GPUs", checkNVMLP2P},
	{"kernel_p2pdma", "kernel P2PDMA support and p2pmem providers", checkKernelP2PDMA},
	{"gpudirect_rdma", "GPUDirect RDMA path: nvidia-peermem or DMA-BUF", checkGPUDirectRDMA},
	{"gdrdrv", "GDRCopy kernel module and /dev/gdrdrv", checkGdrdrv},
	{"memlock_limit", "locked-memory limit for RDMA registration", checkMemlock},
	{"nccl_env", "NCCL settings that disable P2P or GPUDirect", checkNCCLEnv},
	{"p2p_data_integrity", "peer-to-peer copies verified on the owner and through the host", checkDataIntegrity},
}

// Catalogue returns every check in the order they run.
func Catalogue() []Spec { return slices.Clone(catalogue) }

// IDs returns the identifiers of every check, in the order they run.
func IDs() []string {
	ids := make([]string, len(catalogue))
	for i, s := range catalogue {
		ids[i] = s.ID
	}
	return ids
}

// GDRIDs are the checks of GDRCopy readiness, what "p2pcheck gdr" runs.
var GDRIDs = []string{"nvidia_driver", "gdrdrv"}

// Run evaluates the checks named by ids on f, in catalogue order, or every check
// when ids is empty. It returns an error naming the valid identifiers for an
// unknown one.
func Run(f *Facts, ids []string) ([]Result, error) {
	want := map[string]bool{}
	for _, id := range ids {
		if !slices.Contains(IDs(), id) {
			return nil, fmt.Errorf("check: unknown check %q (valid: %s)", id, strings.Join(IDs(), ", "))
		}
		want[id] = true
	}
	var out []Result
	for _, s := range catalogue {
		if len(want) > 0 && !want[s.ID] {
			continue
		}
		r := s.run(f)
		r.ID = s.ID
		out = append(out, r)
	}
	return out, nil
}

// Overall is the node's verdict over results judged against the required
// capabilities req (nil means [DefaultRequirements]): fail if a check failed,
// else error if the tool could not evaluate, else unknown if a check that
// concerns a required capability could not read what it needs, else warn if any
// warned, else pass. Skips do not count: they say why in their own result; nor
// does an unknown that concerns only capabilities not required. Results should
// be judged with [Judge] first, so that only failures that block a required
// capability remain failures.
func Overall(results []Result, req []Capability) Status {
	req = requirements(req)
	o := Pass
	for _, r := range results {
		switch {
		case r.Status == Skip:
			continue
		case r.Status == Unknown && !r.blocksAny(req):
			continue
		}
		o = worse(o, r.Status)
	}
	return o
}

// First returns the result to act on first: the first failure in causal order,
// else the first error, else the first unknown that concerns a required
// capability (its remediation says how to see the fact), else the first
// warning; nil when there is none.
func First(results []Result, req []Capability) *Result {
	req = requirements(req)
	for _, s := range []Status{Fail, Error, Unknown, Warn} {
		for i := range results {
			if results[i].Status == s && (s != Unknown || results[i].blocksAny(req)) {
				return &results[i]
			}
		}
	}
	return nil
}
