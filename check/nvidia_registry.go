package check

import (
	"fmt"
	"strconv"
	"strings"
)

// Sources of the registry rules.
const (
	refNVReg  = "NVIDIA/open-gpu-kernel-modules kernel-open/nvidia/nv-reg.h (RegistryDwords, DmaRemapPeerMmio)"
	refNVRMP2 = "NVIDIA/open-gpu-kernel-modules src/nvidia/interface/nvrm_registry.h (RMForceP2PType, ForceP2P)"
)

// checkNVIDIARegistry reports the NVIDIA driver's registry overrides that change
// peer-to-peer, as /proc/driver/nvidia/params shows the options the driver runs
// with (module options NVreg_<Name> included):
//   - RMForceP2PType in RegistryDwords (nvrm_registry.h): 1 PCIe, 2 NVLink, 3 C2C
//     instead of the driver's own choice (C2C > NVLink > mailbox > BAR1); a type
//     the hardware does not support makes P2P object creation fail;
//   - ForceP2P in RegistryDwords (nvrm_registry.h): reads (bits 1:0), writes (5:4)
//     and atomics (9:8), each 0 disallow, 1 allow, 2 leave to the chipset
//     configuration (the default); a disallowed read or write is what NVML then
//     reports as DR (disabled by regkey) and fails, blocking p2p; a forced allow
//     overrides the driver's chipset policy and warns;
//   - DmaRemapPeerMmio (nv-reg.h, default 1): 0 makes peer MMIO DMA addresses the
//     CPU physical address plus a fixed offset with no IOMMU mappings, which a
//     translating IOMMU faults on: a warning.
//
// Nothing set passes; params unread while the driver is loaded is unknown.
func checkNVIDIARegistry(f *Facts) Result {
	r := Result{Refs: []string{docRef("nvidia_registry"), refNVReg, refNVRMP2}}
	p := f.Node.Platform.NVIDIAParams
	switch {
	case p == nil && f.Node.Platform.NVIDIA == nil:
		r.Status, r.Summary = Skip, "NVIDIA driver not loaded: no registry to read"
		if len(f.NVIDIAGPUs()) == 0 {
			r.Summary = "no NVIDIA GPU"
		}
		return r
	case p == nil:
		r.Status, r.Blocks = Unknown, []Capability{CapP2P}
		r.Summary = "the NVIDIA driver is loaded but /proc/driver/nvidia/params was not read: whether a registry override changes P2P is unknown"
		r.Remediation = []string{"cat /proc/driver/nvidia/params (world-readable), or take the snapshot again with this p2pcheck"}
		return r
	}
	r.Status = Pass
	r.Evidence = append(r.Evidence, Evidence{Source: "/proc/driver/nvidia/params RegistryDwords", Value: p.Values["RegistryDwords"]})
	add := func(subject string, st Status, msg string) {
		r.Status = worse(r.Status, st)
		r.Subjects = appendNew(r.Subjects, subject)
		r.Findings = append(r.Findings, Finding{Subject: subject, Status: st, Message: msg})
		if st == Fail {
			r.addBlocks(CapP2P)
		}
	}
	for _, d := range p.RegistryDwords() {
		switch d.Key {
		case "RMForceP2PType", "ForceP2P":
		default:
			continue
		}
		if d.Err != nil {
			add(d.Key, Warn, fmt.Sprintf("RegistryDwords sets %s=%q, which is not a number: the driver's reading of it is unknown", d.Key, d.Raw))
			continue
		}
		if d.Key == "RMForceP2PType" {
			if st, msg := forceP2PType(d.Value); st != Pass {
				add(d.Key, st, msg)
			}
			continue
		}
		for _, m := range forceP2P(d.Value) {
			add(d.Key, m.Status, m.Message)
		}
	}
	if v, ok := p.Uint("DmaRemapPeerMmio"); ok {
		r.Evidence = append(r.Evidence, Evidence{Source: "/proc/driver/nvidia/params DmaRemapPeerMmio", Value: strconv.Itoa(int(v))})
		if v == 0 {
			add("DmaRemapPeerMmio", Warn, "DmaRemapPeerMmio=0: peer MMIO DMA addresses are the CPU physical address plus a fixed offset, with no IOMMU mappings; "+
				"a translating IOMMU (iommu_mode) faults on peer traffic (nv-reg.h; the default is 1)")
		}
	}
	if pd := p.Values["RegistryDwordsPerDevice"]; strings.Contains(pd, "RMForceP2PType") || strings.Contains(pd, "ForceP2P") {
		add("RegistryDwordsPerDevice", Warn, "RegistryDwordsPerDevice overrides P2P for some GPUs: "+pd)
	}
	switch r.Status {
	case Pass:
		r.Summary = "no registry override of P2P (RMForceP2PType, ForceP2P, DmaRemapPeerMmio at its default)"
	case Fail:
		r.Summary = "a registry override disallows P2P: " + strings.Join(r.Subjects, ", ")
	default:
		r.Summary = "registry overrides change P2P: " + strings.Join(r.Subjects, ", ")
	}
	if r.Status != Pass {
		r.Remediation = []string{"remove the override from NVreg_RegistryDwords (the nvidia module's options in /etc/modprobe.d) and reload the driver, unless NVIDIA support asked for it"}
	}
	return r
}

// forceP2PType judges RMForceP2PType (nvrm_registry.h NV_REG_STR_RM_FORCE_P2P_TYPE).
func forceP2PType(v uint32) (Status, string) {
	name := map[uint32]string{1: "PCIe P2P", 2: "NVLink P2P", 3: "C2C P2P"}[v]
	switch {
	case v == 0:
		return Pass, ""
	case name == "":
		return Warn, fmt.Sprintf("RMForceP2PType=%d is no type the driver defines (0 default, 1 PCIe, 2 NVLink, 3 C2C)", v)
	}
	return Warn, "RMForceP2PType=" + strconv.Itoa(int(v)) + " forces " + name + " instead of the driver's choice (C2C, then NVLink, then PCIe): " +
		"where the hardware lacks it P2P object creation fails, and forcing PCIe on NVLink-connected GPUs slows P2P"
}

// forceP2P judges ForceP2P (nvrm_registry.h NV_REG_STR_CL_FORCE_P2P): two bits each
// for reads (1:0), writes (5:4) and atomics (9:8); 0 disallow, 1 allow, 2 (and
// 3) the chipset-selected configuration.
func forceP2P(v uint32) []Finding {
	var out []Finding
	for _, fld := range []struct {
		what  string
		shift uint
		st    Status // of a disallow
	}{{"reads", 0, Fail}, {"writes", 4, Fail}, {"atomics", 8, Warn}} {
		switch (v >> fld.shift) & 3 {
		case 0:
			out = append(out, Finding{Subject: "ForceP2P", Status: fld.st,
				Message: fmt.Sprintf("ForceP2P=0x%x disallows P2P %s: NVML reports DR (disabled by regkey) and NCCL does not use P2P", v, fld.what)})
		case 1:
			out = append(out, Finding{Subject: "ForceP2P", Status: Warn,
				Message: fmt.Sprintf("ForceP2P=0x%x allows P2P %s whatever the chipset configuration says: the driver's own policy (CNS, TNS) is overridden", v, fld.what)})
		}
	}
	return out
}
