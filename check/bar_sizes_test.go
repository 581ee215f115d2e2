package check_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/pcie"
)

// TestBAR1Unread: a resource line that did not parse makes BAR1 unknown, never
// "no address assigned" (issue 10, item 3).
func TestBAR1Unread(t *testing.T) {
	gpu1 := addr("0000:04:00.0")
	for _, tt := range []struct {
		name   string
		change func(r *pcie.Record)
		want   check.Status
		msg    string
	}{
		{"every BAR line after BAR0 unread", func(r *pcie.Record) {
			r.Resources, r.ResourcesUnread = r.Resources[:1], []int{1, 2, 3}
		}, check.Unknown, "resource line(s) 1, 2, 3 did not parse"},
		{"the line before the BAR1 found unread", func(r *pcie.Record) {
			r.Resources, r.ResourcesUnread = slices.Delete(slices.Clone(r.Resources), 1, 2), []int{1}
		}, check.Unknown, "resource line(s) 1 did not parse"},
		{"a line after BAR1 unread", func(r *pcie.Record) { r.ResourcesUnread = []int{6} }, check.Pass, ""},
		{"no resource file", func(r *pcie.Record) { r.Resources = nil }, check.Unknown, "the resource file was not read"},
		{"BAR1 really unassigned", func(r *pcie.Record) { r.Resources = r.Resources[:1] }, check.Fail, "no address assigned"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := withRecords(loadMachine(t, "degraded-link"), func(r *pcie.Record) {
				if r.Address == gpu1 {
					tt.change(r)
				}
			})
			r := run1(t, check.NewFacts(n, check.Inputs{}), "bar_sizes")
			if r.Status != tt.want {
				t.Fatalf("bar_sizes = %s %q, want %s", r.Status, r.Summary, tt.want)
			}
			if tt.msg != "" && !slices.ContainsFunc(r.Findings, func(f check.Finding) bool { return strings.Contains(f.Message, tt.msg) }) {
				t.Errorf("findings %+v lack %q", r.Findings, tt.msg)
			}
			if r.Status == check.Unknown && (len(r.Remediation) == 0 || !strings.Contains(r.Remediation[0], "resource")) {
				t.Errorf("remediation %q does not say which file to read", r.Remediation)
			}
		})
	}
}

// TestResizeNamesTheBARIndex: the resize fix writes resource<index>_resize of the
// GPU's BAR1 (line 1 here, where BAR0 is 32-bit; line 2 on an H100/H200 whose
// BAR0 is 64-bit) with log2 of the size in MiB.
func TestResizeNamesTheBARIndex(t *testing.T) {
	n := loadMachine(t, "dgx-h100")
	r := run1(t, check.NewFacts(n, check.Inputs{}), "bar_sizes")
	if r.Status != check.Pass {
		t.Fatalf("bar_sizes = %s on dgx-h100 whose BAR1 is at its ReBAR maximum", r.Status)
	}
	// Shrink gpu0's current ReBAR size below its maximum: the fix names its BAR.
	g0 := addr("0000:1a:00.0")
	small := withRecords(n, func(r *pcie.Record) {
		if r.Address == g0 {
			r.Config = slices.Clone(r.Config)
		}
	})
	d := small.Topology.Device(g0)
	if d == nil || d.Config == nil || len(d.Config.ReBAR) == 0 {
		t.Skip("gpu0 of dgx-h100 has no decoded ReBAR capability")
	}
	d.Config.ReBAR[0].Current = 64 << 30
	r = run1(t, check.NewFacts(small, check.Inputs{}), "bar_sizes")
	want := "echo 17 > /sys/bus/pci/devices/0000:1a:00.0/resource1_resize"
	if r.Status != check.Warn || !strings.Contains(strings.Join(r.Remediation, " "), want) {
		t.Errorf("bar_sizes = %s %q, want a warning with %q", r.Status, r.Remediation, want)
	}
	// The simplest fix comes first: the NVIDIA driver resizes BAR1 at load
	// (nv-reg.h EnableResizableBar; issue #23 item 16).
	if len(r.Remediation) == 0 || !strings.HasPrefix(r.Remediation[0], "options nvidia NVreg_EnableResizableBar=1") {
		t.Errorf("bar_sizes' first fix = %q, want options nvidia NVreg_EnableResizableBar=1", r.Remediation)
	}
	// With NVML saying the framebuffer is 64 GiB, BAR1 covers it: no warning.
	fb, total, used := uint64(64<<30), uint64(64<<30), uint64(1<<20)
	small.GPU = &gpu.Facts{GPUs: []gpu.GPU{{Index: 0, Address: &g0, MemoryTotal: &fb, BAR1Total: &total, BAR1Used: &used}}}
	if r := run1(t, check.NewFacts(small, check.Inputs{}), "bar_sizes"); slices.Contains(r.Subjects, g0.String()) {
		t.Errorf("bar_sizes warns on %s whose BAR1 covers the framebuffer: %+v", g0, r.Findings)
	}
}

func TestBARSizesNVML(t *testing.T) {
	runGPUCases(t, "bar_sizes", []gpuCase{
		{"full", func(f *gpu.Facts) { u := uint64(127 << 30); f.GPUs[0].BAR1Used = &u }, verdict{check.Warn, nil, "BAR1 problem on 1 of 2", ""}},
		{"small", func(f *gpu.Facts) { fb := uint64(192 << 30); f.GPUs[1].MemoryTotal = &fb }, verdict{check.Warn, nil, "BAR1 problem on 1 of 2", ""}},
		{"ok", func(*gpu.Facts) {}, verdict{check.Pass, nil, "BAR1 of 2 GPU(s) assigned", ""}},
	})
}
