package probe

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/internal/cuda"
	"github.com/p2pkit/p2pkit/pcie"
)

func TestPattern(t *testing.T) {
	a, b := make([]byte, 1<<16), make([]byte, 1<<16)
	pattern(a, 1)
	pattern(b, 16)
	if firstDiff(a, b) != 0 {
		t.Errorf("patterns of two pairs agree at byte 0")
	}
	zeros := 0
	for i := range a {
		if a[i] == 0 {
			zeros++
		}
		if i > 0 && a[i] == a[i-1] {
			t.Fatalf("byte %d repeats its neighbour", i)
		}
	}
	if zeros > len(a)/128 {
		t.Errorf("%d zero bytes in %d: a zeroed buffer would nearly match", zeros, len(a))
	}
	c := append([]byte(nil), a...)
	if got := firstDiff(a, c); got != -1 {
		t.Errorf("firstDiff(equal) = %d", got)
	}
	c[40000] ^= 1
	if got := firstDiff(a, c); got != 40000 {
		t.Errorf("firstDiff = %d, want 40000", got)
	}
}

func TestSkipReasons(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{cuda.ErrNotSupported, "built without CUDA support (cgo disabled)"},
		{errors.Join(errors.New("x"), cuda.ErrNoDriver), "no CUDA driver (libcuda.so.1)"},
		{errors.New("cuda: cuInit: CUDA_ERROR_NO_DEVICE (100)"), "cuda: cuInit: CUDA_ERROR_NO_DEVICE (100)"},
	} {
		if got := skipReason(tt.err); got != tt.want {
			t.Errorf("skipReason(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestFewerThanTwoGPUs(t *testing.T) {
	got := Run([]*pcie.Device{{}}, DefaultSize, time.Second)
	want := &check.ProbeReport{Skipped: "fewer than two GPUs", Size: DefaultSize, Pairs: []check.ProbePair{}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Run (-want +got):\n%s", diff)
	}
}

// TestHardware probes the GPUs CUDA shows, when there are two or more: every
// pair with peer access must copy the pattern intact. It skips without them,
// and fails instead under P2PKIT_REQUIRE_HW=1.
func TestHardware(t *testing.T) {
	skip := t.Skipf
	if os.Getenv("P2PKIT_REQUIRE_HW") == "1" {
		skip = t.Fatalf
	}
	n, err := cuda.DeviceCount()
	if err != nil || n < 2 {
		skip("needs two CUDA GPUs (count %d, %v)", n, err)
		return
	}
	var gpus []*pcie.Device
	for i := range n {
		d, err := cuda.DeviceGet(i)
		if err != nil {
			t.Fatal(err)
		}
		a, err := d.PCIBusID()
		if err != nil {
			t.Fatal(err)
		}
		gpus = append(gpus, &pcie.Device{Record: pcie.Record{Address: a}})
	}
	rep := Run(gpus, 8<<20, DefaultTimeout)
	if rep.Skipped != "" {
		t.Fatalf("skipped: %s", rep.Skipped)
	}
	if len(rep.Pairs) != n*(n-1) {
		t.Fatalf("%d pairs, want %d", len(rep.Pairs), n*(n-1))
	}
	for _, p := range rep.Pairs {
		switch {
		case p.Err != "":
			t.Errorf("gpu%d->gpu%d: %s", p.Src, p.Dst, p.Err)
		case p.PeerAccess && (!p.Verified || !p.HostVerified || p.BytesPerSecond <= 0):
			t.Errorf("gpu%d->gpu%d: verified %t, host %t, mismatch %d, %.0f B/s", p.Src, p.Dst, p.Verified, p.HostVerified, p.Mismatch, p.BytesPerSecond)
		default:
			t.Logf("gpu%d->gpu%d: peer %t, %.1f GB/s", p.Src, p.Dst, p.PeerAccess, p.BytesPerSecond/1e9)
		}
	}
}

// TestWatchdog: a probe stuck in the driver returns on time with the pairs done
// so far and the step in flight.
func TestWatchdog(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	runAll = func(pr *progress, gpus []*pcie.Device, _ uint64) {
		pr.mu.Lock()
		pr.rep.Pairs = append(pr.rep.Pairs, check.ProbePair{Src: 0, Dst: 1, PeerAccess: true, Verified: true, HostVerified: true, Mismatch: -1})
		pr.mu.Unlock()
		pr.step("the copy gpu1->gpu0")
		<-release
	}
	defer func() { runAll = probeAll }()
	got := Run([]*pcie.Device{{}, {}}, 1<<20, 20*time.Millisecond)
	want := &check.ProbeReport{Size: 1 << 20, Hung: "the copy gpu1->gpu0 did not finish within 20ms",
		Pairs: []check.ProbePair{{Src: 0, Dst: 1, PeerAccess: true, Verified: true, HostVerified: true, Mismatch: -1}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Run (-want +got):\n%s", diff)
	}
}
