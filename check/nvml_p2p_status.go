package check

import (
	"fmt"

	"github.com/p2pkit/p2pkit/gpu"
)

// checkNVMLP2P reports the NVIDIA driver's own P2P verdict for every GPU pair
// (nvmlDeviceGetP2PStatus for read and write, as nvidia-smi topo -p2p shows it):
// NCCL requires both to be OK before using P2P (ncclTopoCheckP2p in
// src/graph/paths.cc), so a pair the driver refuses (CNS chipset, GNS GPU, TNS
// topology, DR regkey, NS) fails and blocks p2p; a pair NVML could not report on
// is unknown. A driver "OK" does not prove copies are correct: see
// p2p_data_integrity.
//
// In a virtual machine GPU P2P depends on the hypervisor (NCCL's troubleshooting
// guide, virtual machines: ACS and ATS as the host sets them), so
// the guest's PCIe tree proves nothing: with two or more NVIDIA GPUs and neither
// NVML's P2P status nor a --probe that copied between them, whether P2P works
// is unknown and blocks p2p.
func checkNVMLP2P(f *Facts) Result {
	r := Result{Refs: []string{docRef("nvml_p2p_status"), "nvmlDeviceGetP2PStatus", "NVIDIA/nccl src/graph/paths.cc ncclTopoCheckP2p"}}
	if f.Node.GPU == nil {
		r.Status, r.Summary = Skip, f.noNVML()
		if f.Hypervisor() && len(f.NVIDIAGPUs()) >= 2 {
			f.unconfirmedInVM(&r)
		}
		return r
	}
	if len(f.Node.GPU.GPUs) < 2 {
		r.Status, r.Summary = Skip, "fewer than two GPUs"
		return r
	}
	r.Status = Pass
	ok, total, unknown := 0, 0, 0
	for _, p := range f.Node.GPU.Pairs {
		total++
		subj := fmt.Sprintf("gpu%d->gpu%d", p.A, p.B)
		read, write := p.P2P.Read, p.P2P.Write
		if read == nil || write == nil {
			unknown++
			r.Findings = append(r.Findings, Finding{Subject: subj, Status: Unknown, Message: "P2P status unknown"})
			continue
		}
		r.Evidence = append(r.Evidence, Evidence{Source: fmt.Sprintf("nvmlDeviceGetP2PStatus(%d,%d)", p.A, p.B), Value: "read=" + read.String() + " write=" + write.String() + nvlinkStatus(p.P2P.NVLink)})
		if *read == gpu.P2POK && *write == gpu.P2POK {
			ok++
			continue
		}
		r.Status = Fail
		r.Subjects = append(r.Subjects, subj)
		r.Findings = append(r.Findings, Finding{Subject: subj, Status: Fail, Message: "driver refuses P2P: read " + p2pCode(*read) + ", write " + p2pCode(*write)})
	}
	r.Observed = fmt.Sprintf("%d of %d ordered pairs OK for read and write", ok, total)
	r.Expected = "OK for every pair"
	switch {
	case r.Status == Fail:
		r.Blocks = []Capability{CapP2P}
		r.Summary = fmt.Sprintf("the NVIDIA driver refuses P2P for %d ordered pair(s)", len(r.Subjects))
		r.Remediation = []string{"fix the platform causes first (acs_path, iommu_mode); CNS and TNS on this topology are the driver's policy, " +
			"DR a registry key (RegistryDwords in /proc/driver/nvidia/params); NVLink-connected GPUs that refuse P2P point to a hardware fault"}
	case unknown > 0:
		r.Status, r.Blocks = Unknown, []Capability{CapP2P}
		r.Summary = fmt.Sprintf("NVML did not report P2P status for %d of %d ordered pair(s)", unknown, total)
	case ok == 0:
		r.Status, r.Summary = Skip, "NVML reported no GPU pair"
	default:
		r.Summary = fmt.Sprintf("the NVIDIA driver allows P2P for all %d ordered GPU pairs", ok)
	}
	return r
}

func nvlinkStatus(s *gpu.P2PStatus) string {
	if s == nil {
		return ""
	}
	return " nvlink=" + s.String()
}

// p2pCode spells out an nvidia-smi topo -p2p code.
func p2pCode(s gpu.P2PStatus) string {
	words := map[gpu.P2PStatus]string{
		gpu.P2POK:                   "OK",
		gpu.P2PChipsetNotSupported:  "CNS (chipset not supported)",
		gpu.P2PGPUNotSupported:      "GNS (GPU not supported)",
		gpu.P2PTopologyNotSupported: "TNS (topology not supported)",
		gpu.P2PDisabledByRegkey:     "DR (disabled by regkey)",
		gpu.P2PNotSupported:         "NS (not supported)",
	}
	if w, ok := words[s]; ok {
		return w
	}
	return "U (unknown)"
}

// unconfirmedInVM makes r, which could not ask NVML, unknown in a VM with two or
// more NVIDIA GPUs unless the probe copied data between a pair: there only the
// driver or a copy can confirm P2P (see checkNVMLP2P).
func (f *Facts) unconfirmedInVM(r *Result) {
	if f.probeVerified() {
		r.Summary += "; in this VM the probe confirmed P2P (p2p_data_integrity)"
		return
	}
	r.Status, r.Blocks = Unknown, []Capability{CapP2P}
	r.Summary = fmt.Sprintf("virtual machine with %d NVIDIA GPUs: P2P depends on the hypervisor and nothing confirmed it (%s; --probe not run)", len(f.NVIDIAGPUs()), f.noNVML())
	r.Remediation = []string{
		"run p2pcheck inside the VM with the NVIDIA driver loaded so that NVML reports P2P status (nvidia-smi topo -p2p rw shows the same), or take the snapshot there (p2pcheck snapshot records it)",
		"or run p2pcheck --probe to copy data between the GPUs",
		"where the driver refuses P2P in the VM, the host decides: ACS as the hypervisor needs it and " + atsSteps,
	}
	r.Refs = append(r.Refs, refNCCLVM, refNVAIEAppendix)
}

// probeVerified reports whether --probe copied data intact between a GPU pair.
func (f *Facts) probeVerified() bool {
	if f.Probe == nil || f.Probe.Hung != "" {
		return false
	}
	for _, p := range f.Probe.Pairs {
		if p.Err == "" && p.PeerAccess && p.Verified && p.HostVerified {
			return true
		}
	}
	return false
}
