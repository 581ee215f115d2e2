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
func checkNVMLP2P(f *Facts) Result {
	r := Result{Refs: []string{docRef("nvml_p2p_status"), "nvmlDeviceGetP2PStatus", "NVIDIA/nccl src/graph/paths.cc ncclTopoCheckP2p"}}
	if f.Node.GPU == nil {
		r.Status, r.Summary = Skip, f.noNVML()
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
