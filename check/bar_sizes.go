package check

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/internal/bytesize"
	"github.com/p2pkit/p2pkit/pcie"
)

// checkBARSizes checks each NVIDIA GPU's BAR1, the aperture through which peers,
// NICs and GDRCopy reach its memory. BAR1 is the first memory BAR after BAR0
// (resource 1, or resource 2 when BAR0 is 64-bit, as on H100/H200). It fails when
// BAR1 is unassigned ("can't assign; no space"), and warns when it is smaller
// than the framebuffer (NVML), nearly used up, or when Resizable BAR could make
// it larger and nothing shows that it already covers the framebuffer. The
// resize file is named by BAR index: resourceN_resize
// (Documentation/ABI/testing/sysfs-bus-pci; drivers/pci/pci-sysfs.c). A GPU
// whose resource file lines up to BAR1 did not parse has an unknown BAR1.
func checkBARSizes(f *Facts) Result {
	r := Result{Refs: []string{docRef("bar_sizes"), "https://docs.nvidia.com/cuda/gpudirect-rdma/ (Displaying GPU BAR space)",
		"linux drivers/pci/rebar.c", refSysfs + " (resource, resourceN_resize)"}}
	gpus := f.NVIDIAGPUs()
	if len(gpus) == 0 {
		r.Status, r.Summary = Skip, "no NVIDIA GPU"
		return r
	}
	r.Status = Pass
	var sizes, unknown []string
	rebarUnknown := 0
	for _, g := range gpus {
		s := g.Address.String()
		bar, ok := BAR1(g)
		if why := bar1Unread(g, bar, ok); why != "" {
			unknown = append(unknown, s)
			r.Findings = append(r.Findings, Finding{Subject: s, Status: Unknown, Message: "BAR1 unknown: " + why})
			continue
		}
		if !ok {
			r.Status = worse(r.Status, Fail)
			r.Subjects = append(r.Subjects, s)
			r.Findings = append(r.Findings, Finding{Subject: s, Status: Fail, Message: "BAR1 has no address assigned: the firmware could not fit it"})
			r.Remediation = appendNew(r.Remediation, "enable Above 4G Decoding (and Resizable BAR) in the BIOS; check dmesg for \"BAR 1 ... can't assign; no space\"")
			continue
		}
		r.Evidence = append(r.Evidence, Evidence{Source: "/sys/bus/pci/devices/" + s + "/resource line " + fmt.Sprint(bar.Index), Value: fmt.Sprintf("0x%016x 0x%016x 0x%016x", bar.Start, bar.End, bar.Flags)})
		j := f.judgeBAR1(&r, g, bar)
		if j.rebarUnknown {
			rebarUnknown++
		}
		sizes = append(sizes, s+" "+j.desc)
		if j.status != Pass {
			r.Status = worse(r.Status, j.status)
			r.Subjects = append(r.Subjects, s)
			r.Findings = append(r.Findings, Finding{Subject: s, Status: j.status, Message: strings.Join(j.msgs, "; ")})
		}
	}
	if len(sizes) > 0 {
		r.Observed = "BAR1 " + strings.Join(sizes, "; ")
	}
	summarizeBARs(&r, len(gpus), unknown, rebarUnknown)
	return r
}

// Thresholds of the BAR1 warnings.
const (
	// smallBAR1 is the BAR1 size at or below which, without NVML's framebuffer
	// size, BAR1 limits GPUDirect RDMA and GDRCopy: 256 MiB is the legacy BAR1
	// of GPUs without Resizable BAR, a small fraction of any data-center GPU's
	// memory (NVIDIA's GPUDirect RDMA guide, "Displaying GPU BAR space").
	smallBAR1 = 256 << 20
	// bar1FullPercent is the share of BAR1 in use at which new GPUDirect and
	// GDRCopy mappings are about to fail (nvmlDeviceGetBAR1MemoryInfo).
	bar1FullPercent = 90
)

// bar1Judgement is what judgeBAR1 makes of one GPU's assigned BAR1.
type bar1Judgement struct {
	desc         string   // its size and what ReBAR and NVML add
	status       Status   // Pass or Warn
	msgs         []string // why it warns
	rebarUnknown bool     // the extended capabilities were not read
}

// judgeBAR1 judges the assigned BAR1 bar of GPU g against Resizable BAR and
// NVML's framebuffer and BAR1 use, adding remediation and evidence to r.
func (f *Facts) judgeBAR1(r *Result, g *pcie.Device, bar pcie.Resource) bar1Judgement {
	size := bar.Size()
	j := bar1Judgement{desc: bytesize.Format(size), status: Pass}
	ng := f.nvmlGPU(g.Address)
	var fb *uint64 // framebuffer size, nil when unknown
	if ng != nil {
		fb = ng.MemoryTotal
	}
	if g.Config == nil || !g.Config.ExtCapsKnown {
		j.rebarUnknown = true
	} else {
		judgeReBAR(r, g, bar, fb, &j)
	}
	if ng == nil {
		if size <= smallBAR1 {
			j.status = worse(j.status, Warn)
			j.msgs = append(j.msgs, "BAR1 of 256 MiB or less limits GPUDirect RDMA registrations and GDRCopy mappings")
		}
		return j
	}
	s := g.Address.String()
	if ng.BAR1Total != nil && ng.BAR1Used != nil {
		j.desc += fmt.Sprintf(", NVML used %s of %s", bytesize.Format(*ng.BAR1Used), bytesize.Format(*ng.BAR1Total))
		r.Evidence = append(r.Evidence, Evidence{Source: "nvmlDeviceGetBAR1MemoryInfo(" + s + ")", Value: fmt.Sprintf("total=%d used=%d", *ng.BAR1Total, *ng.BAR1Used)})
		if *ng.BAR1Total > 0 && *ng.BAR1Used*100 >= *ng.BAR1Total*bar1FullPercent {
			j.status = worse(j.status, Warn)
			j.msgs = append(j.msgs, "BAR1 is at least 90% used: new GPUDirect and GDRCopy mappings will fail")
		}
	}
	if fb != nil && size < *fb {
		j.status = worse(j.status, Warn)
		j.msgs = append(j.msgs, fmt.Sprintf("BAR1 %s is smaller than the %s framebuffer: peers and NICs see only part of it", bytesize.Format(size), bytesize.Format(*fb)))
	}
	return j
}

// judgeReBAR judges the Resizable BAR capability of BAR1 bar of GPU g, whose
// framebuffer is fb (nil when unknown), into j, adding the fixes to r: the
// simplest is the NVIDIA driver's own resize at load (nv-reg.h
// EnableResizableBar: the driver resizes BAR1 to the framebuffer size, or the
// next largest size available), then the BIOS, then a resize at run time.
func judgeReBAR(r *Result, g *pcie.Device, bar pcie.Resource, fb *uint64, j *bar1Judgement) {
	for _, rb := range g.Config.ReBAR {
		if rb.BAR != bar.Index || len(rb.Supported) == 0 {
			continue
		}
		maxSize := rb.Supported[len(rb.Supported)-1]
		j.desc += fmt.Sprintf(" (ReBAR current %s, max %s)", bytesize.Format(rb.Current), bytesize.Format(maxSize))
		if rb.Current >= maxSize {
			continue
		}
		if fb != nil && rb.Current >= *fb {
			j.desc += ", covers the framebuffer"
			continue
		}
		j.status = worse(j.status, Warn)
		m := fmt.Sprintf("Resizable BAR allows %s but BAR1 is %s", bytesize.Format(maxSize), bytesize.Format(rb.Current))
		if fb == nil {
			m += "; whether it already covers the framebuffer is unknown without NVML's memory size"
		}
		j.msgs = append(j.msgs, m)
		r.Remediation = appendNew(r.Remediation, reBARDriverFix,
			"or enable Resizable BAR and Above 4G Decoding in the BIOS, or resize at run time with the driver unbound: "+resizeCommand(g.Address, bar.Index, maxSize))
	}
}

// reBARDriverFix is the simplest way to a larger BAR1: the NVIDIA driver resizes
// it at load (open-gpu-kernel-modules kernel-open/nvidia/nv-reg.h, EnableResizableBar).
const reBARDriverFix = "options nvidia NVreg_EnableResizableBar=1 (in /etc/modprobe.d, then reload the driver or reboot): " +
	"the NVIDIA driver resizes BAR1 to the framebuffer size, or the largest size the platform allows, at load (nv-reg.h EnableResizableBar)"

// summarizeBARs sets r's status, blocks and summary from what checkBARSizes found
// on its n GPUs: the unknown ones and how many had Resizable BAR unread.
func summarizeBARs(r *Result, n int, unknown []string, rebarUnknown int) {
	if r.Status == Fail || len(unknown) > 0 {
		r.addBlocks(CapP2P, CapGDR, CapGDRCopy)
	}
	switch {
	case r.Status == Fail:
		r.Summary = fmt.Sprintf("BAR1 problem on %d of %d GPU(s)", len(r.Subjects), n)
		if len(unknown) > 0 {
			r.Summary += fmt.Sprintf("; %d more unknown", len(unknown))
		}
	case len(unknown) > 0:
		r.Status = Unknown
		r.Summary = fmt.Sprintf("BAR1 of %d of %d GPU(s) could not be read", len(unknown), n)
		if k := len(r.Subjects); k > 0 {
			r.Summary += fmt.Sprintf("; a problem on %d more", k)
		}
		r.Subjects = append(r.Subjects, unknown...)
		r.Remediation = append([]string{"read /sys/bus/pci/devices/<bdf>/resource of " + strings.Join(unknown, ", ") + " (world-readable; lines that did not parse are named in the warnings)"}, r.Remediation...)
	case r.Status == Pass:
		r.Summary = fmt.Sprintf("BAR1 of %d GPU(s) assigned", n)
		if rebarUnknown > 0 {
			r.Summary += "; Resizable BAR unknown without root"
		}
	default:
		r.Summary = fmt.Sprintf("BAR1 problem on %d of %d GPU(s)", len(r.Subjects), n)
	}
}

// bar1Unread says why g's BAR1 is unknown, or "" when it is known: the resource
// file was not read at all, or a line that could hold BAR1 did not parse (a line
// from 1 up to the BAR1 found; when none was found, any line: the parser drops
// unused lines, so a damaged file cannot show that lines 1 to 5 were there).
func bar1Unread(g *pcie.Device, bar pcie.Resource, found bool) string {
	if len(g.Resources) == 0 && len(g.ResourcesUnread) == 0 {
		return "the resource file was not read"
	}
	var lines []string
	for _, i := range g.ResourcesUnread {
		if !found || (i >= 1 && i <= bar.Index) {
			lines = append(lines, strconv.Itoa(i))
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return "resource line(s) " + strings.Join(lines, ", ") + " did not parse"
}

// resizeCommand is the run-time resize of BAR index bar of the function at a to
// size bytes: the size is written to resource<bar>_resize as log2 of the size in
// MiB (Documentation/ABI/testing/sysfs-bus-pci, resourceN_resize).
func resizeCommand(a pcie.Address, bar int, size uint64) string {
	return fmt.Sprintf("echo %d > /sys/bus/pci/devices/%s/resource%d_resize", bits.Len64(size>>20)-1, a, bar)
}

// BAR1 returns what NVIDIA calls a GPU's BAR1: the first memory BAR in use after
// BAR0. BAR0 takes two BAR registers when it is 64-bit, so BAR1 is then resource 2.
func BAR1(d *pcie.Device) (pcie.Resource, bool) {
	for _, b := range d.BARs() {
		if b.Index >= 1 && b.IsMem() {
			return b, true
		}
	}
	return pcie.Resource{}, false
}
