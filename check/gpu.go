package check

import (
	"fmt"
	"strings"

	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/internal/bytesize"
	"github.com/p2pkit/p2pkit/pcie"
)

// Public sources the GPU checks cite.
const (
	urlCCGuide       = "https://docs.nvidia.com/confidential-computing/"
	urlGPUAdminTools = "https://github.com/NVIDIA/gpu-admin-tools"
)

// nvmlGPU returns NVML's view of the GPU at a, or nil.
func (f *Facts) nvmlGPU(a pcie.Address) *gpu.GPU {
	if f.Node.GPU == nil {
		return nil
	}
	for i := range f.Node.GPU.GPUs {
		if g := &f.Node.GPU.GPUs[i]; g.Address != nil && *g.Address == a {
			return g
		}
	}
	return nil
}

// noNVML is the skip reason of a check that needs NVML.
func (f *Facts) noNVML() string {
	if f.NoNVML != "" {
		return f.NoNVML
	}
	return "NVML not available"
}

// checkConfCompute reads the confidential-computing state from NVML
// (nvmlSystemGetConfComputeState): with CC on, the GPU only reaches memory
// through encrypted bounce buffers, so GPU P2P, GPUDirect RDMA and GDRCopy are
// off except multi-GPU over Protected PCIe (NVIDIA's confidential computing
// deployment guide). It skips without NVML and is unknown when NVML could not
// tell.
func checkConfCompute(f *Facts) Result {
	r := Result{Refs: []string{checkDoc("confidential_computing"), "nvmlSystemGetConfComputeState", urlCCGuide, urlGPUAdminTools}}
	if f.Node.GPU == nil {
		r.Status, r.Summary = Skip, f.noNVML()
		return r
	}
	cc := f.Node.GPU.ConfCompute
	if cc == nil {
		r.Status, r.Blocks = Unknown, []Capability{CapP2P, CapGDR, CapGDRCopy}
		r.Summary = "NVML did not report the confidential-computing state: " + f.Node.GPU.Unknown["conf_compute"]
		return r
	}
	r.Evidence = []Evidence{{Source: "nvmlSystemGetConfComputeState", Value: fmt.Sprintf("supported=%t enabled=%t environment=%s", cc.Supported, cc.Enabled, cc.Environment)}}
	switch {
	case cc.Enabled:
		r.Status = Fail
		r.Blocks = []Capability{CapP2P, CapGDR, CapGDRCopy}
		r.Observed = "on"
		r.Summary = "confidential computing is on: GPU P2P, GPUDirect RDMA and GDRCopy are unavailable (multi-GPU only with Protected PCIe)"
		r.Remediation = []string{"on a node meant for P2P, turn CC mode off with NVIDIA's gpu-admin-tools (nvidia_gpu_tools.py --set-cc-mode=off --reset-after-cc-mode-switch), or use Protected PCIe mode for multi-GPU"}
	case !cc.Supported:
		r.Status, r.Observed, r.Summary = Pass, "unsupported", "confidential computing not supported by this GPU or driver (off)"
	default:
		r.Status, r.Observed, r.Summary = Pass, "off", "confidential computing is off"
	}
	return r
}

// checkNVMLP2P reports the NVIDIA driver's own P2P verdict for every GPU pair
// (nvmlDeviceGetP2PStatus for read and write, as nvidia-smi topo -p2p shows it):
// NCCL requires both to be OK before using P2P (ncclTopoCheckP2p in
// src/graph/paths.cc), so a pair the driver refuses (CNS chipset, GNS GPU, TNS
// topology, DR regkey, NS) fails and blocks p2p; a pair NVML could not report on
// is unknown. A driver "OK" does not prove copies are correct: see
// p2p_data_integrity.
func checkNVMLP2P(f *Facts) Result {
	r := Result{Refs: []string{checkDoc("nvml_p2p_status"), "nvmlDeviceGetP2PStatus", "NVIDIA/nccl src/graph/paths.cc ncclTopoCheckP2p"}}
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

// checkDataIntegrity reports the --probe results, the most damaging failure:
// for each ordered GPU pair with peer access, a pattern copied peer-to-peer must
// arrive intact, read back by the owning GPU and through host staging. P2P that
// the driver reports OK has returned zeros or garbage (pytorch/pytorch#84803,
// NVIDIA/open-gpu-kernel-modules#1257, NVIDIA/nccl#2335). Corruption, a hang
// and a CUDA error block p2p. It skips unless --probe ran.
func checkDataIntegrity(f *Facts) Result {
	r := Result{Refs: []string{checkDoc("p2p_data_integrity"), "https://github.com/pytorch/pytorch/issues/84803",
		"https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1257", "https://github.com/NVIDIA/nccl/issues/2335"}}
	pr := f.Probe
	switch {
	case pr == nil:
		r.Status, r.Summary = Skip, "not run: pass --probe to copy data between GPUs"
		return r
	case pr.Hung != "":
		r.Status, r.Blocks = Fail, []Capability{CapP2P}
		r.Summary = "the probe hung: " + pr.Hung + "; a peer-to-peer copy that never completes is what NCCL hangs on"
		r.Evidence = []Evidence{{Source: "cuMemcpyPeer", Value: pr.Hung}}
		r.Remediation = []string{"fix acs_path and iommu_mode first; until then disable P2P for jobs (NCCL_P2P_DISABLE=1)"}
		return r
	case pr.Skipped != "":
		r.Status, r.Summary = Skip, "probe could not run: "+pr.Skipped
		return r
	case len(pr.Pairs) == 0:
		r.Status, r.Summary = Skip, "no GPU pair to probe"
		return r
	}
	r.Status = Pass
	verified, noPeer := 0, 0
	var bws []string
	lo, hi := 0.0, 0.0
	for _, p := range pr.Pairs {
		subj := fmt.Sprintf("gpu%d->gpu%d", p.Src, p.Dst)
		switch {
		case p.Err != "":
			r.Status = worse(r.Status, Error)
			r.Subjects = append(r.Subjects, subj)
			r.Findings = append(r.Findings, Finding{Subject: subj, Status: Error, Message: p.Err})
		case !p.PeerAccess:
			noPeer++
			r.Findings = append(r.Findings, Finding{Subject: subj, Status: Skip, Message: "no peer access (cuDeviceCanAccessPeer = 0)"})
		case !p.Verified || !p.HostVerified:
			r.Status = worse(r.Status, Fail)
			r.Subjects = append(r.Subjects, subj)
			r.Findings = append(r.Findings, Finding{Subject: subj, Status: Fail,
				Message: fmt.Sprintf("copied data differs at byte %d (owner check %t, host check %t)", p.Mismatch, p.Verified, p.HostVerified)})
		default:
			verified++
			bws = append(bws, fmt.Sprintf("%s %.1f GB/s", subj, p.BytesPerSecond/1e9))
			if verified == 1 || p.BytesPerSecond < lo {
				lo = p.BytesPerSecond
			}
			hi = max(hi, p.BytesPerSecond)
		}
	}
	r.Observed = fmt.Sprintf("%d of %d pairs verified with %s each", verified, len(pr.Pairs), bytesize.Format(pr.Size))
	if len(bws) > 0 {
		r.Observed += ": " + strings.Join(bws, ", ")
	}
	r.Expected = "every pair with peer access copies the pattern intact"
	r.Evidence = []Evidence{{Source: "cuMemcpyPeer + cuMemcpyDtoH", Value: r.Observed}}
	switch r.Status {
	case Fail:
		r.Blocks = []Capability{CapP2P}
		r.Summary = fmt.Sprintf("peer-to-peer copies corrupt data on %d pair(s): P2P is reported but broken", len(r.Subjects))
		r.Remediation = []string{"fix iommu_mode and acs_path first; until then disable P2P for jobs (NCCL_P2P_DISABLE=1)"}
	case Error:
		r.Blocks = []Capability{CapP2P}
		r.Summary = fmt.Sprintf("the probe failed on %d pair(s)", len(r.Subjects))
	default:
		r.Summary = fmt.Sprintf("peer-to-peer copies verified on %d pair(s), %.0f-%.0f GB/s", verified, lo/1e9, hi/1e9)
		if verified == 0 {
			r.Status, r.Summary = Skip, "no GPU pair has peer access"
		} else if noPeer > 0 {
			r.Summary += fmt.Sprintf("; %d pair(s) without peer access", noPeer)
		}
	}
	return r
}
