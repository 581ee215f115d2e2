package procfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/hostfs"
)

// This file reads /proc/cpuinfo, which arch/x86/kernel/cpu/proc.c show_cpuinfo and
// arch/arm64/kernel/cpuinfo.c c_show print.

// CPUInfo is what p2pkit needs of /proc/cpuinfo: the identity of CPU 0, the boot CPU
// whose vendor and family the kernel's P2PDMA host-bridge rule looks at
// (drivers/pci/p2pdma.c cpu_supports_p2pdma), and its flags.
type CPUInfo struct {
	VendorID  string   // vendor_id, e.g. "GenuineIntel", "AuthenticAMD"; empty off x86
	Family    int      // cpu family, decimal (0x17 = 23 is AMD Zen); 0 when absent
	Model     int      // model, decimal; 0 when absent
	ModelName string   // model name
	Flags     []string // flags (x86) or Features (arm64)
	CPUs      int      // number of processor entries
}

// HasFlag reports whether CPU 0 lists flag.
func (c CPUInfo) HasFlag(flag string) bool { return slices.Contains(c.Flags, flag) }

// Hypervisor reports whether the kernel runs under a hypervisor: x86 CPUs set the
// "hypervisor" flag (CPUID.1:ECX bit 31) in a guest.
func (c CPUInfo) Hypervisor() bool { return c.HasFlag("hypervisor") }

// CPUInfo reads /proc/cpuinfo.
func (fsys FS) CPUInfo() (CPUInfo, error) {
	b, err := fsys.r.ReadFile("proc/cpuinfo", procLimit)
	if err != nil {
		return CPUInfo{}, err
	}
	c, err := parseCPUInfo(b)
	if err != nil {
		return CPUInfo{}, hostfs.PathError("parse", "proc/cpuinfo", err)
	}
	return c, nil
}

// parseCPUInfo parses /proc/cpuinfo (arch/x86/kernel/cpu/proc.c show_cpuinfo;
// arch/arm64/kernel/cpuinfo.c c_show): blocks of "key<tabs>: value" lines separated by
// blank lines, the first block being CPU 0.
func parseCPUInfo(b []byte) (CPUInfo, error) {
	var c CPUInfo
	first := true
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, procLimit)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			if c.CPUs > 0 {
				first = false
			}
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue // arm64 and others print free-form lines; they carry nothing needed
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if key == "processor" {
			c.CPUs++
			continue
		}
		if !first {
			continue
		}
		var err error
		switch key {
		case "vendor_id":
			c.VendorID = val
		case "cpu family":
			c.Family, err = strconv.Atoi(val)
		case "model":
			c.Model, err = strconv.Atoi(val)
		case "model name":
			c.ModelName = val
		case "flags", "Features":
			c.Flags = strings.Fields(val)
		}
		if err != nil {
			return CPUInfo{}, fmt.Errorf("%s: want a decimal number, got %q", key, val)
		}
	}
	if err := sc.Err(); err != nil {
		return CPUInfo{}, err
	}
	if c.CPUs == 0 {
		return CPUInfo{}, errors.New("no processor entry")
	}
	return c, nil
}

// Arm64 reports an arm64 CPU: /proc/cpuinfo has no x86 vendor_id and lists the
// arm64 "asimd" feature (hwcap_str in arch/arm64/kernel/cpuinfo.c). Grace Hopper
// and Grace Blackwell nodes are arm64.
func (c CPUInfo) Arm64() bool { return c.VendorID == "" && c.HasFlag("asimd") }
