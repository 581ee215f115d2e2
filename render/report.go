package render

import (
	"fmt"
	"io"
	"strings"

	"github.com/p2pkit/p2pkit/check"
)

// maxFindings bounds the findings printed under one result; JSON has them all.
const maxFindings = 8

// ReportText writes the node report for people: a header naming the machine,
// one line per check with its status, the details of every check that needs
// attention indented below it, the overall verdict with its exit code, and one
// "fix first:" line.
func ReportText(w io.Writer, r check.Report, s Style) error {
	// Every text that can carry a name read from the machine goes through Escape.
	p := newPrinter(w)
	p.line(s.bold("p2pcheck report") + " " + Escape(envLine(r.Environment)))
	p.line(Escape(deviceLine(r.Devices)))
	p.line("requirements: " + requirementsLine(r.Requirements))
	p.line("")
	width, cell := 0, 5
	for _, c := range r.Checks {
		width = max(width, len(c.ID))
		cell = max(cell, len(c.Status))
	}
	for _, c := range r.Checks {
		p.line(fmt.Sprintf("%s  %-*s  %s", statusCell(c.Status, cell, s), width, c.ID, Escape(c.Summary)))
		if c.Status == check.Pass || c.Status == check.Skip {
			continue
		}
		ind := strings.Repeat(" ", cell+2+width+2)
		if c.Observed != "" {
			p.line(ind + s.dim("observed: ") + Escape(clip(c.Observed)))
		}
		if c.Expected != "" {
			p.line(ind + s.dim("expected: ") + Escape(c.Expected))
		}
		shown := 0
		for _, f := range c.Findings {
			if f.Status == check.Pass {
				continue
			}
			if shown == maxFindings {
				p.line(ind + s.dim(fmt.Sprintf("... %d more in --format json", countNonPass(c.Findings)-shown)))
				break
			}
			p.line(ind + "- " + Escape(f.Subject) + ": " + Escape(f.Message))
			shown++
		}
		for _, fix := range c.Remediation {
			p.line(ind + s.bold("fix: ") + Escape(fix))
		}
	}
	p.line("")
	p.line(fmt.Sprintf("overall: %s (exit %d)", statusWord(r.Overall, s), r.ExitCode))
	if ff := r.FixFirst; ff != nil {
		line := "fix first: " + ff.ID
		if ff.Subject != "" {
			line += " " + ff.Subject
		}
		line += ": " + ff.Summary
		if ff.Remediation != "" {
			line += " -> " + ff.Remediation
		}
		p.line(s.bold(Escape(line)))
	} else {
		p.line("fix first: nothing, the node is ready")
	}
	return p.done()
}

// maxObserved bounds the observed line of the text report; JSON has it whole.
const maxObserved = 200

// clip shortens an observation for the text report at a word boundary.
func clip(s string) string {
	if len(s) <= maxObserved {
		return s
	}
	cut := strings.LastIndexByte(s[:maxObserved], ' ')
	if cut <= 0 {
		cut = maxObserved
	}
	return strings.TrimRight(s[:cut], ",;") + " ... (all in --format json)"
}

func countNonPass(fs []check.Finding) int {
	n := 0
	for _, f := range fs {
		if f.Status != check.Pass {
			n++
		}
	}
	return n
}

// envLine summarizes the environment: source, kernel, driver, VM, privilege.
func envLine(e check.Environment) string {
	parts := []string{string(e.Source)}
	if e.Kernel != "" {
		parts = append(parts, "kernel "+e.Kernel)
	}
	if e.Driver != "" {
		d := "NVIDIA " + e.Driver
		if e.DriverFlavour != "" {
			d += " " + e.DriverFlavour
		}
		parts = append(parts, d)
	}
	if e.CUDA != "" {
		parts = append(parts, "CUDA "+e.CUDA)
	}
	if e.Hypervisor {
		parts = append(parts, "virtual machine")
	} else {
		parts = append(parts, "bare metal")
	}
	switch {
	case e.Privileged == nil:
		parts = append(parts, "config space unread")
	case *e.Privileged:
		parts = append(parts, "privileged")
	default:
		parts = append(parts, "unprivileged (64-byte config: ACS and capabilities unknown)")
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// deviceLine counts the devices of interest by kind.
func deviceLine(ds []check.Device) string {
	var order []string
	counts := map[string]int{}
	for _, d := range ds {
		if counts[d.Kind] == 0 {
			order = append(order, d.Kind)
		}
		counts[d.Kind]++
	}
	if len(order) == 0 {
		return "devices: none of interest (no GPU, RDMA NIC, Ethernet NIC, NVMe or p2pmem provider)"
	}
	parts := make([]string, len(order))
	for i, k := range order {
		parts[i] = fmt.Sprintf("%d %s", counts[k], k)
	}
	return "devices: " + strings.Join(parts, ", ")
}

// requirementsLine names the capabilities the report judged against.
func requirementsLine(req []check.Capability) string {
	words := map[check.Capability]string{
		check.CapP2P:     "p2p (GPU peer-to-peer)",
		check.CapGDR:     "gdr (GPUDirect RDMA)",
		check.CapGDRCopy: "gdrcopy (GDRCopy)",
		check.CapNVMeP2P: "nvme-p2p (kernel P2PDMA)",
	}
	parts := make([]string, len(req))
	for i, c := range req {
		parts[i] = words[c]
		if parts[i] == "" {
			parts[i] = string(c)
		}
	}
	return strings.Join(parts, ", ") + "; a check fails the node only if it blocks one of them (--require)"
}

// statusCell is the status column, width characters wide: the widest status
// word of the report, so that a report without unknowns keeps its 5 columns.
func statusCell(st check.Status, width int, s Style) string {
	w := statusWord(st, s)
	return w + strings.Repeat(" ", max(0, width-len(st)))
}

func statusWord(st check.Status, s Style) string {
	switch st {
	case check.Pass:
		return s.good("pass")
	case check.Warn:
		return s.warn("WARN")
	case check.Fail:
		return s.bad("FAIL")
	case check.Error:
		return s.bad("ERROR")
	case check.Unknown:
		return s.warn("UNKNOWN")
	}
	return s.dim(string(st))
}

// ReportJSON writes the report as JSON, the form schema/report.v1.json describes.
func ReportJSON(w io.Writer, r check.Report) error { return writeJSON(w, r) }
