package check

import (
	"fmt"
	"slices"
	"strings"

	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
)

// IOMMU command-line options checkIOMMU reports, as Documentation/admin-guide/
// kernel-parameters.txt spells them.
var iommuOptions = []string{"iommu", "intel_iommu", "amd_iommu", "iommu.passthrough", "iommu.strict"}

// checkIOMMU reports how the IOMMU treats DMA and whether that matters for the
// node's peer paths. The group types come from /sys/kernel/iommu_groups/*/type
// (iommu_group_show_type in drivers/iommu/iommu.c; readable since Linux 4.19,
// writable since 5.11), the hardware units from /sys/class/iommu and the options
// from /proc/cmdline.
//
// Translation (DMA, DMA-FQ) matters per path, not per node:
//   - GPU pairs over NVLink (HGX, NVL, GH200) never cross the IOMMU;
//   - GPU pairs over PCIe: NVIDIA documents P2P over a translating IOMMU on
//     bare-metal Linux as not supported (CUDA C++ Programming Guide, peer-to-peer
//     memory access), so it blocks p2p;
//   - GPU-NIC pairs (GPUDirect RDMA): nvidia-peermem needs 1:1 addresses, "they
//     must be disabled or configured for pass-through" (NVIDIA's GPUDirect RDMA
//     guide, "IOMMUs"), while DMA-BUF imports map the peer through the IOMMU
//     (dma_buf_map_attachment), so it blocks gdr only where DMA-BUF is not possible;
//   - NVMe and p2pmem pairs go through the kernel's P2PDMA, which maps through the
//     IOMMU where it must (pci_p2pdma_map_segment in drivers/pci/p2pdma.c).
//
// Without NVML the NVLink facts are missing, so translated GPU pairs are unknown,
// never a failure. In a VM the guest IOMMU only warns: the host decides.
func checkIOMMU(f *Facts) Result {
	p := f.Node.Platform
	r := Result{Refs: []string{docRef("iommu_mode"), "linux drivers/iommu/iommu.c iommu_group_show_type", urlIOMMUGroupABI, urlKernelParams, urlGPUDirectRDMA, urlNCCLTrouble}}
	var opts []string
	if p.Cmdline != nil {
		for _, name := range iommuOptions {
			if v, ok := p.Cmdline.Lookup(name); ok {
				opts = append(opts, name+"="+v)
			}
		}
		r.Evidence = append(r.Evidence, Evidence{Source: "/proc/cmdline", Value: strings.Join(opts, " ")})
	}
	if p.IOMMUUnits != nil {
		r.Evidence = append(r.Evidence, Evidence{Source: "/sys/class/iommu", Value: strings.Join(p.IOMMUUnits, " ")})
	}
	if slices.Contains(opts, "amd_iommu=on") {
		r.Findings = append(r.Findings, Finding{Subject: "amd_iommu=on", Status: Warn,
			Message: "amd_iommu= has no on value (Documentation/admin-guide/kernel-parameters.txt): the kernel ignores it; AMD-Vi is on by default"})
	}
	if len(p.IOMMUGroups) == 0 {
		r.Status = Pass
		r.Observed = "off"
		r.Summary = "no IOMMU active (no IOMMU groups): DMA addresses are physical"
		if len(p.IOMMUUnits) > 0 {
			r.Summary = "IOMMU units present (" + strings.Join(p.IOMMUUnits, ", ") + ") but no groups: DMA is not translated"
		}
		r.Evidence = append(r.Evidence, Evidence{Source: "/sys/kernel/iommu_groups", Value: "absent or empty"})
		return r
	}
	types := map[int]node.IOMMUDomainType{}
	for _, g := range p.IOMMUGroups {
		types[g.ID] = g.Type
	}
	counts := map[node.IOMMUDomainType]int{}
	translated := map[pcie.Address]bool{}
	for _, d := range f.devices {
		if d.IOMMUGroup == nil {
			continue
		}
		t := types[*d.IOMMUGroup]
		counts[t]++
		if t.Translated() {
			translated[d.Address] = true
		}
	}
	var seen []string
	for _, t := range []node.IOMMUDomainType{node.IOMMUIdentity, node.IOMMUDMA, node.IOMMUDMAFQ, node.IOMMUUnmanaged, node.IOMMUBlocked, node.IOMMUUnknown} {
		if counts[t] > 0 {
			seen = append(seen, fmt.Sprintf("%d %s", counts[t], t))
		}
	}
	r.Observed = "groups of devices of interest: " + strings.Join(seen, ", ")
	r.Evidence = append(r.Evidence, Evidence{Source: "/sys/kernel/iommu_groups/*/type", Value: strings.Join(seen, ", ")})
	r.Expected = "identity (passthrough) or no IOMMU where a peer path needs it"
	passthrough := slices.Contains(opts, "iommu=pt") || slices.ContainsFunc(opts, func(o string) bool {
		v, ok := strings.CutPrefix(o, "iommu.passthrough=")
		on, valid := kernelBool(v)
		return ok && valid && on
	})
	switch {
	case len(translated) > 0:
		f.judgeTranslation(&r, translated)
	case counts[node.IOMMUIdentity] > 0 && counts[node.IOMMUUnknown] == 0:
		r.Status = Pass
		r.Summary = "IOMMU in passthrough (identity domains)"
	case passthrough:
		r.Status = Pass
		r.Summary = "IOMMU group types unreadable; the command line asks for passthrough (" + strings.Join(opts, " ") + ")"
	default:
		r.Status = Unknown
		r.Blocks = []Capability{CapP2P, CapGDR}
		r.Summary = "IOMMU active but its domain types are unreadable (/sys/kernel/iommu_groups/*/type exists since Linux 4.19) and the command line does not ask for passthrough"
		r.Remediation = []string{"look for the default domain type in the kernel log (dmesg | grep -i -e DMAR -e AMD-Vi -e iommu); if it is translated: " + passthroughParam(f)}
	}
	return r
}

// kernelBool reads v as the kernel's kstrtobool (lib/kstrtox.c) does: only the
// first character counts, 'Y', 'y', 'T', 't' and '1' are true, 'N', 'n', 'F',
// 'f' and '0' false, and "on"/"off" (any case) by their second character; ok is
// false for anything else, which the kernel rejects (-EINVAL) and so ignores.
func kernelBool(v string) (val, ok bool) {
	if v == "" {
		return false, false
	}
	switch v[0] {
	case 'y', 'Y', 't', 'T', '1':
		return true, true
	case 'n', 'N', 'f', 'F', '0':
		return false, true
	case 'o', 'O':
		if len(v) > 1 {
			switch v[1] {
			case 'n', 'N':
				return true, true
			case 'f', 'F':
				return false, true
			}
		}
	}
	return false, false
}

// judgeTranslation fills r for an IOMMU that translates DMA for the devices in
// translated, pair by pair (see checkIOMMU). The pairs are judged by classes
// (pairClass) of devices alike here: role, translation, GPU or RDMA NIC, and a GPU
// with NVML facts on its own, since NVLink is a fact of each pair.
func (f *Facts) judgeTranslation(r *Result, translated map[pcie.Address]bool) {
	dmabuf := f.dmabuf()
	type key struct {
		role            role
		translated, gpu bool
		rdma            bool
		nvml            int // the device's index when NVML knows the GPU, else -1
	}
	cs := groupClasses(len(f.devices), func(i int) key {
		d := f.devices[i]
		k := key{role: f.roles[i], translated: translated[d.Address], gpu: d.IsGPU(), rdma: isRDMANIC(d), nvml: -1}
		if k.gpu && f.nvmlGPU(d.Address) != nil {
			k.nvml = i
		}
		return k
	}, f.roles)
	judge := func(p pair) translationJudgement { return f.judgeTranslated(p, translated, dmabuf) }
	unknown := false
	var see []string // how to see the facts the unknown pairs lack, as they come
	affected, onPath := 0, 0
	firsts := map[Capability]pair{}
	var lines pairLines
	for cp := range f.classPairs(cs) {
		j := judge(cp.first)
		if !j.onPath {
			continue
		}
		onPath += cp.n
		unknown = unknown || j.unknown
		if j.see != "" {
			see = appendNew(see, j.see)
		}
		if j.block != "" {
			affected += cp.n
			firsts = firstOf(firsts, j.block, cp.first)
		}
		lines.count(j.status, j.subject, cp.n)
	}
	blocks := inPairOrder(firsts)
	want := func(a, b *pairClass) bool {
		p := f.pairAt(min(a.members[0], b.members[0]), max(a.members[0], b.members[0]))
		if a == b {
			p = f.pairAt(a.members[0], a.members[1])
		}
		findings, subjects := lines.open()
		j := judge(p)
		return j.onPath && (findings || subjects && j.subject)
	}
	done := func() bool { findings, subjects := lines.open(); return !findings && !subjects }
	for pr := range f.pairsAmong(cs, want, done) {
		if j := judge(pr); j.onPath {
			lines.finding(pr, j.status, j.msg...)
			if j.subject {
				lines.subject(pr)
			}
		}
	}
	lines.settle()
	lines.listFindings(r)
	n := len(translated)
	switch {
	case onPath == 0:
		r.Status = Pass
		r.Summary = fmt.Sprintf("IOMMU translates DMA for %d device(s), but no GPU, NIC or NVMe peer pair is among them", n)
		return
	case (affected > 0 || unknown) && f.Hypervisor():
		r.Status = Warn
		r.Summary = fmt.Sprintf("guest IOMMU translates DMA for %d device(s) on peer paths: P2P needs the hypervisor's support", n)
	case affected > 0:
		r.Status = Fail
		r.Blocks = blocks
		r.Summary = fmt.Sprintf("IOMMU translates DMA on %d peer path(s) that need passthrough (%d device(s) of interest translated)", affected, n)
	case unknown:
		r.Status = Unknown
		r.Blocks = []Capability{CapP2P, CapGDR}
		r.Summary = fmt.Sprintf("IOMMU translates DMA for %d device(s) of interest; whether their peer paths need passthrough is unknown", n)
	default:
		r.Status = Pass
		r.Summary = fmt.Sprintf("IOMMU translates DMA for %d device(s), but no peer path needs passthrough (NVLink, DMA-BUF or kernel P2PDMA)", n)
		return
	}
	r.Subjects = append(r.Subjects, lines.subjects...)
	if r.Status == Unknown {
		// The verdict is unknown: say how to see the fact before changing the
		// boot parameters for it.
		r.Remediation = append(see, "if they do need it (GPU pairs over PCIe, GPUDirect RDMA through nvidia-peermem): "+
			passthroughParam(f)+", then reboot",
			identityFix)
		return
	}
	r.Remediation = []string{
		passthroughParam(f) + ", then reboot",
		identityFix,
	}
}

// identityFix makes one IOMMU group identity at run time; the sysfs ABI allows it
// only for a group of one device bound to no driver
// (Documentation/ABI/testing/sysfs-kernel-iommu_groups, since Linux 5.11).
const identityFix = "or, per IOMMU group (Linux 5.11 and later), where the group holds that one device and its driver is unbound " +
	"(Documentation/ABI/testing/sysfs-kernel-iommu_groups): echo identity > /sys/kernel/iommu_groups/<group>/type"

// passthroughParam is the boot parameter that makes the default domains identity
// on this machine (Documentation/admin-guide/kernel-parameters.txt): iommu=pt is
// x86-only; iommu.passthrough=1 works on arm64 and x86. amd_iommu= has no "on"
// (AMD-Vi is on by default) and intel_iommu=on only enables VT-d.
func passthroughParam(f *Facts) string {
	c := f.Node.Platform.CPU
	switch {
	case f.Arm64():
		return "add iommu.passthrough=1 to the kernel command line (arm64: iommu= is an x86 parameter)"
	case c != nil && (c.VendorID == "AuthenticAMD" || c.VendorID == "HygonGenuine"):
		return "add iommu=pt to the kernel command line (AMD-Vi stays on for interrupt remapping and VFIO; amd_iommu= has no on value)"
	case c != nil && c.VendorID == "GenuineIntel":
		return "add iommu=pt to the kernel command line (keep intel_iommu=on where VT-d must stay on for VFIO)"
	}
	return "add iommu.passthrough=1 (arm64 and x86) or iommu=pt (x86 only) to the kernel command line"
}

// translationJudgement is what judgeTranslation makes of one pair.
type translationJudgement struct {
	onPath  bool // a device of the pair is translated
	status  Status
	msg     []string
	subject bool
	unknown bool
	see     string     // for an unknown: how to see the fact it lacks
	block   Capability // what the translation breaks, "" when nothing
}

// How to see the facts a translated pair's judgement may lack.
const (
	seeNVLink = "see which GPU pairs talk over NVLink first: run p2pcheck where NVML answers (on the machine, " +
		"or --snapshot of a snapshot taken there with the driver loaded); nvidia-smi topo -m shows NV# between them"
	seeDMABuf = "see whether GPUDirect RDMA can use DMA-BUF first (gpudirect_rdma): NCCL_DEBUG=INFO prints \"DMA-BUF is available\" per HCA"
)

// judgeTranslated judges one pair behind a translating IOMMU.
func (f *Facts) judgeTranslated(pr pair, translated map[pcie.Address]bool, dmabuf dmabufVerdict) translationJudgement {
	if !translated[pr.a.Address] && !translated[pr.b.Address] {
		return translationJudgement{}
	}
	gpuA, gpuB := pr.a.IsGPU(), pr.b.IsGPU()
	j := translationJudgement{onPath: true, status: Pass}
	switch {
	case gpuA && gpuB:
		switch f.nvlinkPair(pr.a.Address, pr.b.Address) {
		case nvlinkUnknown:
			j.status, j.subject, j.unknown, j.see = Unknown, true, true, seeNVLink
			j.msg = []string{"GPU pair behind a translating IOMMU: without NVML it is unknown whether it talks over NVLink (unaffected) or PCIe (unsupported)"}
		case nvlinkYes:
			j.msg = []string{"GPU pair talks over NVLink: the IOMMU is not on its path"}
		default:
			j.status, j.subject, j.block = Fail, true, CapP2P
			j.msg = []string{"GPU pair talks over PCIe through a translating IOMMU: not supported on bare metal (CUDA programming guide)"}
		}
	case (gpuA && isRDMANIC(pr.b)) || (gpuB && isRDMANIC(pr.a)):
		switch dmabuf.state {
		case Pass:
			j.msg = []string{"GPUDirect RDMA over DMA-BUF maps the GPU through the IOMMU: unaffected"}
		case Fail:
			j.status, j.subject, j.block = Fail, true, CapGDR
			j.msg = []string{"GPUDirect RDMA through nvidia-peermem needs 1:1 addresses (", dmabuf.why, ")"}
		default:
			j.status, j.subject, j.unknown, j.see = Unknown, true, true, seeDMABuf
			j.msg = []string{"GPUDirect RDMA: unaffected over DMA-BUF, broken through nvidia-peermem; whether DMA-BUF is possible is unknown (", dmabuf.why, ")"}
		}
	default:
		j.msg = []string{"kernel P2PDMA maps through the IOMMU where it must"}
	}
	return j
}
