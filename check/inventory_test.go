package check_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/check"
)

func ptr(n int) *int { return &n }

func TestParseExpectation(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want check.Expectation
		err  string
	}{
		{"gpus=8,rdma-nics=8,nvme=2", check.Expectation{GPUs: ptr(8), RDMANICs: ptr(8), NVMe: ptr(2)}, ""},
		{" nvme = 0 , gpus=1,", check.Expectation{GPUs: ptr(1), NVMe: ptr(0)}, ""},
		{"rdma-nics=65536", check.Expectation{RDMANICs: ptr(65536)}, ""},
		{"", check.Expectation{}, "empty list"},
		{" , ", check.Expectation{}, "empty list"},
		{"gpus", check.Expectation{}, `want KIND=N, not "gpus"`},
		{"nics=2", check.Expectation{}, `unknown kind "nics"`},
		{"gpus=1,gpus=2", check.Expectation{}, "gpus given twice"},
		{"gpus=-1", check.Expectation{}, `not "-1"`},
		{"gpus=+1", check.Expectation{}, `not "+1"`},
		{"gpus=65537", check.Expectation{}, `not "65537"`},
		{"gpus=eight", check.Expectation{}, `not "eight"`},
		{"gpus=" + strings.Repeat("9", 100), check.Expectation{}, `..."`},
	} {
		t.Run(tt.in, func(t *testing.T) {
			got, err := check.ParseExpectation(tt.in)
			if tt.err != "" {
				if err == nil || !errors.Is(err, check.ErrExpectation) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one wrapping ErrExpectation with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if again, err := check.ParseExpectation(got.String()); err != nil || !cmp.Equal(again, got) {
				t.Errorf("String %q reads back as %+v, %v", got.String(), again, err)
			}
		})
	}
}

func FuzzParseExpectation(f *testing.F) {
	for _, s := range []string{"gpus=8,rdma-nics=8,nvme=2", "nvme=0", "gpus=1,gpus=2", "x", ",,=", "gpus=99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := check.ParseExpectation(s)
		if err != nil {
			if !errors.Is(err, check.ErrExpectation) {
				t.Fatalf("error %v does not wrap ErrExpectation", err)
			}
			if len(err.Error()) > 256 {
				t.Fatalf("error of %d bytes quotes too much", len(err.Error()))
			}
			return
		}
		again, err := check.ParseExpectation(e.String())
		if err != nil || !cmp.Equal(again, e) {
			t.Fatalf("%q -> %q reads back as %+v, %v", s, e.String(), again, err)
		}
	})
}

// inventoryOf runs the report of machine with in and returns its inventory
// result with the overall verdict and the NFD features.
func inventoryOf(t *testing.T, machine string, in check.Inputs, m check.Meta) (check.Result, check.Report) {
	t.Helper()
	in.Source = check.Snapshot
	f := check.NewFacts(loadMachine(t, machine), in)
	res, err := check.Run(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep := check.NewReport(f, res, m)
	for _, r := range rep.Checks {
		if r.ID == "inventory" {
			return r, rep
		}
	}
	t.Fatal("no inventory result")
	return check.Result{}, rep
}

// TestInventory: fewer devices than expected fail the node whatever it is for,
// naming the kinds missing and the counts found; more are fine; without an
// expectation a required capability with nothing to judge is unknown (exit 3,
// not ready), one not required does not count.
func TestInventory(t *testing.T) {
	gdrcopy := testMeta
	gdrcopy.Require = []check.Capability{check.CapGDRCopy}
	for _, tt := range []struct {
		name, machine string
		in            check.Inputs
		meta          check.Meta
		status        check.Status
		summary       string
		subjects      []string
		exit          int
		ready         string
	}{
		{"as expected", "dgx-h100-acs-off", check.Inputs{Expect: &check.Expectation{GPUs: ptr(8), RDMANICs: ptr(8), NVMe: ptr(2)}}, testMeta,
			check.Pass, "as expected: 8 GPU, 8 RDMA NIC, 2 NVMe", nil, 0, "true"},
		{"more is fine", "dgx-h100-acs-off", check.Inputs{Expect: &check.Expectation{GPUs: ptr(4), NVMe: ptr(0)}}, testMeta,
			check.Pass, "as expected: 8 GPU (4 expected; more is fine), 2 NVMe (0 expected; more is fine)", nil, 0, "true"},
		{"a GPU missing", "dgx-h100-acs-off", check.Inputs{Expect: &check.Expectation{GPUs: ptr(9), RDMANICs: ptr(10), NVMe: ptr(2)}}, testMeta,
			check.Fail, "devices missing: found 8 of 9 GPU, 8 of 10 RDMA NIC (--expect gpus=9,rdma-nics=10,nvme=2)", []string{"GPU", "RDMA NIC"}, 1, "false"},
		// A missing device fails the node whatever it is required to do.
		{"missing, gdrcopy required", "dgx-h100-acs-off", check.Inputs{Require: gdrcopy.Require, Expect: &check.Expectation{GPUs: ptr(9)}}, gdrcopy,
			check.Fail, "devices missing: found 8 of 9 GPU (--expect gpus=9)", []string{"GPU"}, 1, "false"},
		{"no expectation", "dgx-h100-acs-off", check.Inputs{}, testMeta,
			check.Pass, "8 GPU, 8 RDMA NIC, 2 NVMe: every required capability has devices to judge (no --expect: the counts themselves are not judged)", nil, 0, "true"},
		{"no RDMA NIC for gdr", "degraded-link", check.Inputs{}, testMeta,
			check.Unknown, "nothing to judge: gdr needs a GPU and an RDMA NIC, found 2 GPU, 0 RDMA NIC (without --expect, whether the node should have them is unknown)",
			[]string{"gdr"}, 3, "false"},
		{"what it is built with", "degraded-link", check.Inputs{Expect: &check.Expectation{GPUs: ptr(2), RDMANICs: ptr(0)}}, testMeta,
			check.Pass, "as expected: 2 GPU, 0 RDMA NIC", nil, 0, "true"},
		{"GPU-less VM", "qemu-q35-iommu", check.Inputs{}, testMeta,
			check.Unknown, "nothing to judge: p2p needs 2 GPUs, found 0; gdr needs a GPU and an RDMA NIC, found 0 GPU, 0 RDMA NIC (without --expect, whether the node should have them is unknown)",
			[]string{"p2p", "gdr"}, 3, "false"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, rep := inventoryOf(t, tt.machine, tt.in, tt.meta)
			if diff := cmp.Diff([]any{tt.status, tt.summary, tt.subjects, tt.exit, tt.ready},
				[]any{r.Status, r.Summary, r.Subjects, rep.ExitCode, rep.Features.Ready}); diff != "" {
				t.Errorf("status, summary, subjects, exit, ready (-want +got):\n%s", diff)
			}
			if tt.status != check.Pass && (rep.FixFirst == nil || rep.FixFirst.ID != "inventory" || len(r.Remediation) == 0) {
				t.Errorf("fix first %+v, remediation %q; want inventory's", rep.FixFirst, r.Remediation)
			}
		})
	}
}

// TestNothingJudged: a run in which every check skipped is unknown (exit 3,
// not ready) and says which check judged nothing; one skip beside a pass is
// still a pass.
func TestNothingJudged(t *testing.T) {
	f := check.NewFacts(loadMachine(t, "dgx-h100-acs-off"), check.Inputs{Source: check.Snapshot})
	for _, tt := range []struct {
		ids     []string
		overall check.Status
		exit    int
		first   string
	}{
		{[]string{"p2p_data_integrity"}, check.Unknown, 3, "p2p_data_integrity"},
		{[]string{"p2p_data_integrity", "acs_path"}, check.Pass, 0, ""},
	} {
		t.Run(strings.Join(tt.ids, ","), func(t *testing.T) {
			res, err := check.Run(f, tt.ids)
			if err != nil {
				t.Fatal(err)
			}
			rep := check.NewReport(f, res, testMeta)
			first := ""
			if rep.FixFirst != nil {
				first = rep.FixFirst.ID
				if !strings.HasPrefix(rep.FixFirst.Summary, "nothing was judged: ") || rep.FixFirst.Status != check.Unknown {
					t.Errorf("fix first %+v, want an unknown saying nothing was judged", rep.FixFirst)
				}
			}
			if diff := cmp.Diff([]any{tt.overall, tt.exit, tt.first, tt.exit == 0}, []any{rep.Overall, rep.ExitCode, first, rep.Features.Ready == "true"}); diff != "" {
				t.Errorf("overall, exit, fix first, ready (-want +got):\n%s", diff)
			}
		})
	}
}

// TestKindWords: one word per kind in the report's devices, the same the
// inventory counts.
func TestKindWords(t *testing.T) {
	rep := report(t, "dgx-h100-acs-off")
	counts := map[string]int{}
	for _, d := range rep.Devices {
		counts[d.Kind]++
	}
	if diff := cmp.Diff(map[string]int{check.KindGPU: 8, check.KindRDMANIC: 8, check.KindNVMe: 2}, counts); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
	if rep.Features.GPUs != "8" || rep.Features.RDMANICs != "8" || rep.Features.NVMe != "2" {
		t.Errorf("features gpus %s rdma_nics %s nvme %s, want 8 8 2", rep.Features.GPUs, rep.Features.RDMANICs, rep.Features.NVMe)
	}
}
