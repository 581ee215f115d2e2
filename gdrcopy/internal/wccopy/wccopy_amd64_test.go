//go:build !purego

package wccopy

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestHasMOVDIR64B checks the raw CPUID read against the flags Linux
// reports in /proc/cpuinfo.
func TestHasMOVDIR64B(t *testing.T) {
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Skipf("no /proc/cpuinfo: %v", err)
	}
	var flags []string
	for line := range strings.Lines(string(info)) {
		if name, value, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "flags" {
			flags = strings.Fields(value)
			break
		}
	}
	if flags == nil {
		t.Skip("/proc/cpuinfo has no flags line")
	}
	want := false
	for _, f := range flags {
		want = want || f == "movdir64b"
	}
	if got := hasMOVDIR64B(); got != want {
		t.Errorf("hasMOVDIR64B() = %v; /proc/cpuinfo lists movdir64b: %v", got, want)
	}
}

// TestGates checks the implications between the feature gates, the way
// golang.org/x/sys/cpu tests its own flags: they hold on any CPU.
func TestGates(t *testing.T) {
	if useMOVDIR64B && !useAVX2 {
		t.Error("MOVDIR64B kernel enabled without AVX2")
	}
	if useAVX2 && !cpu.X86.HasAVX {
		t.Error("AVX2 kernels enabled without AVX")
	}
	if useSSE41 != cpu.X86.HasSSE41 {
		t.Error("SSE4.1 gate disagrees with golang.org/x/sys/cpu")
	}
}
