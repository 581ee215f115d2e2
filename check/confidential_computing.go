package check

import "fmt"

// Public sources the GPU checks cite.
const (
	urlCCGuide       = "https://docs.nvidia.com/confidential-computing/"
	urlGPUAdminTools = "https://github.com/NVIDIA/gpu-admin-tools"
)

// checkConfCompute reads the confidential-computing state from NVML
// (nvmlSystemGetConfComputeState): with CC on, the GPU only reaches memory
// through encrypted bounce buffers, so GPU P2P, GPUDirect RDMA and GDRCopy are
// off except multi-GPU over Protected PCIe (NVIDIA's confidential computing
// deployment guide). It skips without NVML and is unknown when NVML could not
// tell.
func checkConfCompute(f *Facts) Result {
	r := Result{Refs: []string{docRef("confidential_computing"), "nvmlSystemGetConfComputeState", urlCCGuide, urlGPUAdminTools}}
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
