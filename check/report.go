package check

import (
	"slices"
	"strconv"
	"time"

	"github.com/p2pkit/p2pkit/pcie"
)

// SchemaVersion is the major version of the report's JSON form
// (schema/report.v1.json). Changes within a version only add fields.
const SchemaVersion = "1"

// Report is a node's readiness report: every result with the facts around it.
type Report struct {
	SchemaVersion string    `json:"schema_version"`
	ToolVersion   string    `json:"tool_version"`
	Hostname      string    `json:"hostname"`
	Timestamp     time.Time `json:"timestamp"`
	Overall       Status    `json:"overall"`
	ExitCode      int       `json:"exit_code"`
	// Requirements are the capabilities the node was judged against: a check
	// fails the node only if it blocks one of them.
	Requirements []Capability `json:"requirements"`
	Environment  Environment  `json:"environment"`
	Devices      []Device     `json:"devices"`
	Checks       []Result     `json:"checks"`
	// FixFirst is the one thing to act on first; nil when nothing needs action.
	FixFirst *FixFirst `json:"fix_first,omitempty"`
	// Warnings are problems that degraded the picture without stopping it: an
	// unreadable file, a device whose attributes did not parse.
	Warnings []string `json:"warnings,omitempty"`
	// Features are the node's capabilities as label-safe values.
	Features Features `json:"features"`
	// Probe holds the --probe measurements; nil when the probe was not asked for.
	Probe *ProbeReport `json:"probe,omitempty"`
	// AER holds the AER error totals of the functions on peer paths that have
	// them, what the next run compares with (aer_errors); in address order.
	AER []AERCount `json:"aer,omitempty"`
}

// AERCount is one function's AER error totals since boot.
type AERCount struct {
	BDF         pcie.Address `json:"bdf"`
	Correctable uint64       `json:"correctable"`
	NonFatal    uint64       `json:"nonfatal"`
	Fatal       uint64       `json:"fatal"`
}

// Environment describes the analysed machine and how it was read.
type Environment struct {
	Kernel string `json:"kernel,omitempty"`
	// Driver is the NVIDIA driver version and DriverFlavour "open" or "proprietary".
	Driver        string `json:"driver,omitempty"`
	DriverFlavour string `json:"driver_flavour,omitempty"`
	// CUDA is the CUDA version the driver supports ("13.0"), from NVML.
	CUDA       string `json:"cuda,omitempty"`
	CPU        string `json:"cpu,omitempty"`
	Hypervisor bool   `json:"hypervisor"`
	// Privileged is null when no configuration space was read at all.
	Privileged *bool  `json:"privileged"`
	Source     Source `json:"source"`
}

// Device is one device of interest as the report lists it.
type Device struct {
	BDF  pcie.Address `json:"bdf"`
	Kind string       `json:"kind"`
	// Index is the GPU's index in PCI address order, as nvidia-smi numbers them;
	// nil for other devices.
	Index    *int     `json:"index,omitempty"`
	Name     string   `json:"name,omitempty"`
	UUID     string   `json:"uuid,omitempty"`
	Names    []string `json:"names,omitempty"` // netdevs, RDMA devices, NVMe controllers
	NUMANode *int     `json:"numa_node,omitempty"`
	Link     *Link    `json:"link,omitempty"`
	// BAR1Bytes is the sysfs size of an NVIDIA GPU's BAR1; BAR1Total and BAR1Used
	// are NVML's.
	BAR1Bytes *uint64 `json:"bar1_bytes,omitempty"`
	BAR1Total *uint64 `json:"bar1_total_bytes,omitempty"`
	BAR1Used  *uint64 `json:"bar1_used_bytes,omitempty"`
}

// Link is a device's PCIe link, generation and lanes; zero means unknown.
type Link struct {
	CurrentGen   int `json:"current_gen"`
	CurrentWidth int `json:"current_width"`
	MaxGen       int `json:"max_gen"`
	MaxWidth     int `json:"max_width"`
}

// FixFirst names the first result to act on.
type FixFirst struct {
	ID     string `json:"id"`
	Status Status `json:"status"`
	// Subject is the result's first subject (a PCI address, a GPU pair, a
	// setting); empty for a node-wide result.
	Subject     string `json:"subject,omitempty"`
	Summary     string `json:"summary"`
	Remediation string `json:"remediation,omitempty"`
}

// Meta is what a report needs besides the facts.
type Meta struct {
	ToolVersion string
	Hostname    string
	Timestamp   time.Time
	// FailOnWarn makes warnings exit 2 (--fail-on=warn).
	FailOnWarn bool
	// Require lists the capabilities the node must have (--require); nil means
	// DefaultRequirements.
	Require []Capability
}

// ExitCode maps an overall status to the process exit code: 0 for pass and warn
// (2 for warn with failOnWarn), 1 for fail, 3 when the tool could not evaluate
// (error) or a check of a required capability is unknown.
func ExitCode(overall Status, failOnWarn bool) int {
	switch overall {
	case Fail:
		return ExitFail
	case Error, Unknown:
		return ExitNoEval
	case Warn:
		if failOnWarn {
			return ExitWarn
		}
	}
	return ExitPass
}

// NewReport assembles the report of results over f, judged against the
// required capabilities m.Require (see [Judge]).
func NewReport(f *Facts, results []Result, m Meta) Report {
	req := requirements(m.Require)
	raw := results
	results = Judge(results, req)
	o := Overall(results, req)
	idle := o == Pass && len(results) > 0 && !judged(results, req)
	if idle {
		o = Unknown
	}
	rep := Report{
		SchemaVersion: SchemaVersion,
		ToolVersion:   m.ToolVersion,
		Hostname:      m.Hostname,
		Timestamp:     m.Timestamp.UTC().Truncate(time.Second),
		Overall:       o,
		ExitCode:      ExitCode(o, m.FailOnWarn),
		Requirements:  slices.Clone(req),
		Environment:   f.environment(),
		Devices:       f.deviceList(),
		Checks:        results,
		Probe:         f.Probe,
	}
	rep.Features = f.features(raw, o)
	for _, d := range f.pathDevices() {
		if a := d.AER; a != nil {
			rep.AER = append(rep.AER, AERCount{BDF: d.Address, Correctable: a.Correctable, NonFatal: a.NonFatal, Fatal: a.Fatal})
		}
	}
	for _, w := range f.Node.Warnings {
		rep.Warnings = append(rep.Warnings, w.Error())
	}
	if rep.Checks == nil {
		rep.Checks = []Result{}
	}
	if r := First(results, req); r != nil {
		ff := &FixFirst{ID: r.ID, Status: r.Status, Summary: r.Summary}
		if len(r.Subjects) > 0 {
			ff.Subject = r.Subjects[0]
		}
		if len(r.Remediation) > 0 {
			ff.Remediation = r.Remediation[0]
		}
		rep.FixFirst = ff
	} else if idle {
		r := results[0]
		rep.FixFirst = &FixFirst{ID: r.ID, Status: Unknown, Summary: "nothing was judged: " + r.Summary,
			Remediation: "run p2pcheck where the checks apply, or without --check"}
	}
	return rep
}

// judged reports whether some result judged something for the required
// capabilities req: a pass, warning or failure, or an unknown that counts. A
// run in which every check skipped (--check p2p_data_integrity where no probe
// could run) judged nothing, and [NewReport] makes it unknown rather than a
// pass: ready only when something was judged and passed.
func judged(results []Result, req []Capability) bool {
	for _, r := range results {
		switch {
		case r.Status == Skip:
		case r.Status == Unknown && !r.blocksAny(req):
		default:
			return true
		}
	}
	return false
}

func (f *Facts) environment() Environment {
	p := f.Node.Platform
	e := Environment{Hypervisor: f.Hypervisor(), Source: f.Source}
	if e.Source == "" {
		e.Source = Snapshot
	}
	if p.Kernel != nil {
		e.Kernel = p.Kernel.Release
	}
	if p.NVIDIA != nil {
		e.Driver, e.DriverFlavour = p.NVIDIA.Version, "proprietary"
		if p.NVIDIA.Open {
			e.DriverFlavour = "open"
		}
	}
	if g := f.Node.GPU; g != nil {
		if e.Driver == "" {
			e.Driver = g.DriverVersion
		}
		if v := g.CUDADriverVersion; v > 0 {
			e.CUDA = cudaVersion(v)
		}
	}
	if p.CPU != nil {
		e.CPU = p.CPU.ModelName
	}
	if f.PrivilegeKnown {
		v := f.Privileged
		e.Privileged = &v
	}
	return e
}

// cudaVersion formats 1000*major + 10*minor as "major.minor".
func cudaVersion(v int) string {
	return strconv.Itoa(v/1000) + "." + strconv.Itoa(v%1000/10)
}

func (f *Facts) deviceList() []Device {
	out := []Device{}
	gpuIndex := 0
	for _, d := range f.devices {
		dev := Device{BDF: d.Address, Kind: kind(d), NUMANode: d.NUMANode, Name: d.DeviceName}
		dev.Names = append(append(append([]string{}, d.NetDevs...), d.RDMADevs...), d.NVMeDevs...)
		if len(dev.Names) == 0 {
			dev.Names = nil
		}
		if d.IsGPU() {
			i := gpuIndex
			dev.Index = &i
			gpuIndex++
		}
		if l := d.Link(); l.Current.Known() || l.Max.Known() {
			dev.Link = &Link{CurrentGen: int(l.Current.Speed), CurrentWidth: l.Current.Width, MaxGen: int(l.Max.Speed), MaxWidth: l.Max.Width}
		}
		if d.IsGPU() && d.Vendor == pcie.VendorNVIDIA {
			if b, ok := BAR1(d); ok {
				n := b.Size()
				dev.BAR1Bytes = &n
			}
			if g := f.nvmlGPU(d.Address); g != nil {
				dev.BAR1Total, dev.BAR1Used, dev.UUID = g.BAR1Total, g.BAR1Used, g.UUID
				if dev.Name == "" {
					dev.Name = g.Name
				}
			}
		}
		out = append(out, dev)
	}
	return out
}
