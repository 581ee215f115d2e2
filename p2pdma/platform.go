package p2pdma

import "github.com/p2pkit/p2pkit/kversion"

// Platform holds the facts outside the PCI tree that the verdict depends on.
type Platform struct {
	// CPUVendor is the x86 vendor_id of CPU 0 in /proc/cpuinfo ("AuthenticAMD",
	// "GenuineIntel", "HygonGenuine", ...); empty on other architectures.
	CPUVendor string
	// CPUFamily is the "cpu family" field of CPU 0 in /proc/cpuinfo (decimal there:
	// 23 is family 0x17, the first Zen).
	CPUFamily int
	// Kernel is the release series (major.minor, [kversion.Version.Series]) of the
	// kernel whose verdicts are predicted: stable updates do not change the P2PDMA
	// rules except where a whitelist entry notes a backport. The zero value means
	// unknown; it is then taken to be some release at least as new as 6.1 and
	// every rule that changed after 6.1 yields Unknown.
	Kernel kversion.Version
}

// cpuSupportsP2PDMA mirrors cpu_supports_p2pdma() in drivers/pci/p2pdma.c (5.9 and
// later): on x86, the boot CPU is AMD (not Hygon) and of family 0x17 (Zen) or newer.
func (p Platform) cpuSupportsP2PDMA() bool {
	return p.CPUVendor == "AuthenticAMD" && p.CPUFamily >= 0x17
}

// Versions at which the modelled rules change (see the package comment).
var (
	kernelFirstP2PDMA = kversion.Version{Major: 4, Minor: 20} // drivers/pci/p2pdma.c added
	kernelCPURule     = kversion.Version{Major: 5, Minor: 9}  // commit dea286bb71ba, the AMD Zen CPU rule
	kernelBaseline    = kversion.Version{Major: 6, Minor: 1}  // the release the base whitelist was read from
)
