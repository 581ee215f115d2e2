package p2pdma

import (
	"fmt"
	"strconv"
	"strings"
)

// Platform holds the facts outside the PCI tree that the verdict depends on.
type Platform struct {
	// CPUVendor is the x86 vendor_id of CPU 0 in /proc/cpuinfo ("AuthenticAMD",
	// "GenuineIntel", "HygonGenuine", ...); empty on other architectures.
	CPUVendor string
	// CPUFamily is the "cpu family" field of CPU 0 in /proc/cpuinfo (decimal there:
	// 23 is family 0x17, the first Zen).
	CPUFamily int
	// Kernel is the version of the kernel whose verdicts are predicted. The zero value
	// means unknown; it is then taken to be some release at least as new as 6.1 and
	// every rule that changed after 6.1 yields Unknown.
	Kernel KernelVersion
}

// cpuSupportsP2PDMA mirrors cpu_supports_p2pdma() in drivers/pci/p2pdma.c (5.9 and
// later): on x86, the boot CPU is AMD (not Hygon) and of family 0x17 (Zen) or newer.
func (p Platform) cpuSupportsP2PDMA() bool {
	return p.CPUVendor == "AuthenticAMD" && p.CPUFamily >= 0x17
}

// KernelVersion is a Linux release, major.minor. Stable updates (the third number)
// do not change the P2PDMA rules except where a whitelist entry notes a backport.
type KernelVersion struct {
	Major, Minor int
}

// IsZero reports whether the version is unknown.
func (v KernelVersion) IsZero() bool { return v == KernelVersion{} }

// Compare returns -1, 0 or +1 as v is older than, the same as, or newer than w.
func (v KernelVersion) Compare(w KernelVersion) int {
	switch {
	case v.Major != w.Major:
		return cmpInt(v.Major, w.Major)
	default:
		return cmpInt(v.Minor, w.Minor)
	}
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// String returns "major.minor", or "unknown" for the zero value.
func (v KernelVersion) String() string {
	if v.IsZero() {
		return "unknown"
	}
	return strconv.Itoa(v.Major) + "." + strconv.Itoa(v.Minor)
}

// ParseKernelVersion parses the leading "major.minor" of a kernel release string
// such as "6.12.117-amd64", "6.1" or "7.3.0-rc1"; anything after the minor number is
// ignored.
func ParseKernelVersion(s string) (KernelVersion, error) {
	majStr, rest, ok := strings.Cut(s, ".")
	if !ok {
		return KernelVersion{}, fmt.Errorf("p2pdma: invalid kernel version %q: want major.minor", s)
	}
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	maj, err1 := strconv.Atoi(majStr)
	mnr, err2 := strconv.Atoi(rest[:end])
	if err1 != nil || err2 != nil || maj <= 0 || maj > 99 || mnr > 99 {
		return KernelVersion{}, fmt.Errorf("p2pdma: invalid kernel version %q: want major.minor", s)
	}
	return KernelVersion{Major: maj, Minor: mnr}, nil
}

// Versions at which the modelled rules change (see the package comment).
var (
	kernelFirstP2PDMA = KernelVersion{4, 20} // drivers/pci/p2pdma.c added
	kernelCPURule     = KernelVersion{5, 9}  // commit dea286bb71ba, the AMD Zen CPU rule
	kernelBaseline    = KernelVersion{6, 1}  // the release the base whitelist was read from
)
