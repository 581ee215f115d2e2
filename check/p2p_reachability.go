package check

import (
	"fmt"
	"slices"
	"strings"

	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pcie"
)

// mapTypeCount counts verdicts by map type.
type mapTypeCount [256]int

// reachScan is what checkReachability needs of the pairs.
type reachScan struct {
	counts mapTypeCount
	// refused pairs without P2PDMA users, refused pairs with them, unknown
	// P2PDMA pairs, refused pairs behind VMD, pairs with P2PDMA users
	refusedGPU, refused, unknown, vmd, users int
	acsUnknown                               bool
	why                                      string // the first unknown pair's reason
	whyPair                                  *pair  // that pair
	lines                                    pairLines
}

// count judges the pairs of two classes, whose verdicts are alike, for
// checkReachability; v is the verdict of their first pair.
func (s *reachScan) count(cp classPair, v *p2pdma.Verdict) {
	n, p := cp.n, cp.first
	s.counts[v.MapType] += n
	kernelUser := p.blocks() == CapNVMeP2P
	if kernelUser {
		s.users += n
	}
	switch {
	case v.MapType == p2pdma.NotSupported && !kernelUser:
		s.refusedGPU += n
		s.lines.count(Pass, false, n)
	case v.MapType == p2pdma.NotSupported:
		s.refused += n
		if behindVMD(p.a) || behindVMD(p.b) {
			s.vmd += n
		}
		s.lines.count(Warn, true, n)
	case v.MapType == p2pdma.Unknown && kernelUser:
		s.unknown += n
		s.acsUnknown = s.acsUnknown || v.HasUnknown(p2pdma.ACSUnread)
		if s.whyPair == nil || p.before(*s.whyPair) {
			s.whyPair = &p
		}
		s.lines.count(Unknown, false, n)
	}
}

// makes reports whether the pair p, of verdict v, makes a finding and a subject.
func (s *reachScan) makes(p pair, v *p2pdma.Verdict) (finding, subject bool) {
	kernelUser := p.blocks() == CapNVMeP2P
	switch {
	case v.MapType == p2pdma.NotSupported:
		return true, kernelUser
	case v.MapType == p2pdma.Unknown && kernelUser:
		return true, false
	}
	return false, false
}

// add lists one pair for checkReachability, counted already.
func (s *reachScan) add(p pair, v *p2pdma.Verdict) {
	kernelUser := p.blocks() == CapNVMeP2P
	switch {
	case v.MapType == p2pdma.NotSupported && !kernelUser:
		s.lines.finding(p, Pass, "not-supported for kernel P2PDMA, which GPU peer copies and GPUDirect RDMA do not use: ", v.Reason)
	case v.MapType == p2pdma.NotSupported:
		s.lines.subject(p)
		vmd := ""
		if behindVMD(p.a) || behindVMD(p.b) {
			vmd = " (an NVMe controller behind Intel VMD)"
		}
		s.lines.finding(p, Warn, "not-supported: ", v.Reason, vmd)
	case v.MapType == p2pdma.Unknown && kernelUser:
		s.lines.finding(p, Unknown, "unknown: ", v.Reason)
	}
}

// behindVMD reports whether d sits in an Intel VMD domain: the vmd driver
// numbers its domains from 0x10000 up (drivers/pci/controller/vmd.c
// vmd_find_free_domain), above the 16-bit domains of ACPI host bridges. The
// kernel's P2PDMA finds no whitelisted host bridge there.
func behindVMD(d *pcie.Device) bool { return d.HostBridge != nil && d.HostBridge.Domain >= 0x10000 }

// checkReachability reports the pairs the kernel's P2PDMA code refuses
// (not-supported): peers under host bridges the kernel does not whitelist, or
// below different root complexes without the AMD Zen rule
// (drivers/pci/p2pdma.c calc_map_type_and_dist, cpu_supports_p2pdma). It
// judges the kernel's P2PDMA users only: a refused or unknown pair with an NVMe
// controller or a p2pmem provider (NVMe CMB, p2pmem, RDMA on p2pdma pages)
// warns or is unknown, and blocks nvme-p2p. GPU pairs are listed but never
// judged here: NVIDIA GPUs copy peer-to-peer on the NVIDIA driver's own
// decision (nvml_p2p_status), and GPUDirect RDMA between a GPU and a NIC
// (nvidia-peermem or DMA-BUF) never goes through the kernel's P2PDMA.
func checkReachability(f *Facts) Result {
	r := Result{Refs: []string{docRef("p2p_reachability"), refP2PDMA, "linux Documentation/driver-api/pci/p2pdma.rst"}}
	sc := f.scan()
	if sc.n == 0 {
		r.Status, r.Summary = Skip, noPairs
		return r
	}
	s := &sc.reach
	counts, refusedGPU, refused, unknown, vmd, users := &s.counts, s.refusedGPU, s.refused, s.unknown, s.vmd, s.users
	r.Status = Pass
	if refused > 0 {
		r.Status = Warn
		r.addBlocks(CapNVMeP2P)
	}
	r.Subjects = slices.Clone(s.lines.subjects)
	s.lines.listFindings(&r)
	r.Observed = mapTypeCounts(counts)
	r.Expected = "bus-addr or thru-host-bridge for every pair with an NVMe controller or p2pmem provider"
	switch {
	case refused > 0:
		r.Summary = fmt.Sprintf("the kernel refuses P2PDMA for %d pair(s) with an NVMe controller or p2pmem provider", refused)
		if vmd > 0 {
			r.Remediation = append(r.Remediation, "disable Intel VMD (Volume Management Device) for these NVMe drives in the BIOS, or bind the NVMe outside the VMD domain: the kernel's P2PDMA does not reach devices behind VMD")
		}
		r.Remediation = append(r.Remediation,
			"place peers below one PCIe switch or one root complex, or use a CPU/host bridge the kernel whitelists (drivers/pci/p2pdma.c pci_p2pdma_whitelist)")
		if unknown > 0 {
			r.Summary += fmt.Sprintf("; %d more pair(s) unknown", unknown)
		}
	case unknown > 0:
		r.Status = Unknown
		r.addBlocks(CapNVMeP2P)
		r.Summary = fmt.Sprintf("the kernel's verdict is unknown for %d pair(s) with an NVMe controller or p2pmem provider, e.g. %s", unknown, s.why)
		if s.acsUnknown {
			r.Summary += " (" + f.unreadable() + ")"
			r.Remediation = []string{f.seeConfig("ACS Control")}
		} else {
			r.Remediation = []string{"p2pcheck does not model this kernel's rule for these pairs: when a P2PDMA user (an NVMe-oF target with p2pmem, a p2pmem allocation) asks for a pair the kernel refuses, it logs \"cannot be used for peer-to-peer DMA\"; check dmesg"}
		}
	case users == 0:
		r.Status = Skip
		r.Summary = "no pair with an NVMe controller or p2pmem provider: GPU peer copies and GPUDirect RDMA do not use the kernel's P2PDMA (verdicts: " + r.Observed + ")"
	case refusedGPU > 0:
		r.Summary = fmt.Sprintf("the kernel refuses P2PDMA only for %d pair(s) of GPUs and NICs, which do not use it (GPU copies follow the NVIDIA driver, GPUDirect RDMA uses nvidia-peermem or DMA-BUF)", refusedGPU)
	default:
		r.Summary = fmt.Sprintf("the kernel allows P2PDMA for all %d pair(s): %s", sc.n, r.Observed)
	}
	return r
}

func mapTypeCounts(c *mapTypeCount) string {
	var parts []string
	for _, m := range []p2pdma.MapType{p2pdma.BusAddr, p2pdma.ThruHostBridge, p2pdma.NotSupported, p2pdma.Unknown} {
		if c[m] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c[m], m))
		}
	}
	return strings.Join(parts, ", ")
}
