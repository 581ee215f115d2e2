package check_test

import (
	"testing"

	"github.com/p2pkit/p2pkit/check"
)

func TestDataIntegrity(t *testing.T) {
	a0, a1 := addr("0000:03:00.0"), addr("0000:04:00.0")
	good := func(src, dst int) check.ProbePair {
		p := check.ProbePair{Src: src, Dst: dst, SrcBDF: a0, DstBDF: a1, PeerAccess: true, Verified: true, HostVerified: true, Mismatch: -1, BytesPerSecond: 48e9}
		if src == 1 {
			p.SrcBDF, p.DstBDF = a1, a0
		}
		return p
	}
	corrupt := good(1, 0)
	corrupt.Verified, corrupt.HostVerified, corrupt.Mismatch = false, false, 4096
	failed := good(1, 0)
	failed.Err = "cuda: cuMemcpyPeer: CUDA_ERROR_ILLEGAL_ADDRESS (700)"
	noPeer := check.ProbePair{Src: 1, Dst: 0, SrcBDF: a1, DstBDF: a0, Mismatch: -1}
	for _, tt := range []struct {
		name  string
		probe *check.ProbeReport
		want  outcome
	}{
		{"not asked", nil, outcome{check.Skip, "pass --probe", ""}},
		{"no cuda", &check.ProbeReport{Skipped: "built without CUDA support (cgo disabled)"}, outcome{check.Skip, "cgo disabled", ""}},
		{"hung", &check.ProbeReport{Size: 64 << 20, Hung: "the copy gpu1->gpu0 did not finish within 2m0s", Pairs: []check.ProbePair{good(0, 1)}},
			outcome{check.Fail, "the probe hung: the copy gpu1->gpu0", "NCCL_P2P_DISABLE=1"}},
		{"verified", &check.ProbeReport{Size: 64 << 20, Pairs: []check.ProbePair{good(0, 1), good(1, 0)}}, outcome{check.Pass, "verified on 2 pair(s)", ""}},
		{"corrupt", &check.ProbeReport{Size: 64 << 20, Pairs: []check.ProbePair{good(0, 1), corrupt}}, outcome{check.Fail, "corrupt data on 1 pair(s)", "NCCL_P2P_DISABLE=1"}},
		{"cuda error", &check.ProbeReport{Size: 64 << 20, Pairs: []check.ProbePair{good(0, 1), failed}}, outcome{check.Error, "failed on 1 pair(s)", ""}},
		{"one without peer", &check.ProbeReport{Size: 64 << 20, Pairs: []check.ProbePair{good(0, 1), noPeer}}, outcome{check.Pass, "1 pair(s) without peer access", ""}},
		{"none with peer", &check.ProbeReport{Size: 64 << 20, Pairs: []check.ProbePair{noPeer}}, outcome{check.Skip, "no GPU pair has peer access", ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			compare(t, tt.want, run1(t, check.NewFacts(loadMachine(t, "degraded-link"), check.Inputs{Probe: tt.probe}), "p2p_data_integrity"))
		})
	}
}
