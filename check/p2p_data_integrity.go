package check

import (
	"fmt"
	"strings"

	"github.com/p2pkit/p2pkit/internal/bytesize"
)

// checkDataIntegrity reports the --probe results, the most damaging failure:
// for each ordered GPU pair with peer access, a pattern copied peer-to-peer must
// arrive intact, read back by the owning GPU and through host staging. P2P that
// the driver reports OK has returned zeros or garbage (pytorch/pytorch#84803,
// NVIDIA/open-gpu-kernel-modules#1257, NVIDIA/nccl#2335). Corruption, a hang
// and a CUDA error block p2p. It skips unless --probe ran.
func checkDataIntegrity(f *Facts) Result {
	r := Result{Refs: []string{docRef("p2p_data_integrity"), "https://github.com/pytorch/pytorch/issues/84803",
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
