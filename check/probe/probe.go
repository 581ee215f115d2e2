// Package probe is p2pcheck's opt-in data-integrity probe (--probe): for every
// ordered GPU pair with peer access it copies a pattern peer-to-peer through the
// CUDA driver, reads it back on the owning GPU and through host staging, and times
// the copy. It exists because "P2P OK" from the driver has returned zeros or
// garbage on real machines (github.com/pytorch/pytorch/issues/84803,
// github.com/NVIDIA/open-gpu-kernel-modules/issues/1257, github.com/NVIDIA/nccl/issues/2335),
// and because the popular samples copy zero-filled buffers without checking them.
//
// The probe needs libcuda.so.1 and a cgo build (internal/cuda); without them the
// report says why it was skipped.
package probe

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/internal/cuda"
	"github.com/p2pkit/p2pkit/pcie"
)

// DefaultSize is the bytes copied per pair: large enough to cross many GPU pages
// and time the copy, small enough for any GPU's free memory and a quick run.
const DefaultSize = 64 << 20

// repeats is how many timed copies give the bandwidth.
const repeats = 4

// DefaultTimeout bounds a whole probe. Copies between healthy GPUs take
// milliseconds; a path that hangs (ACS or IOMMU trouble: NCCL's troubleshooting
// guide warns that an apparent hang can be very low P2P bandwidth) would otherwise hang
// p2pcheck with it.
const DefaultTimeout = 2 * time.Minute

// Run probes every ordered pair of gpus (in PCI address order: indices in the
// report are positions in gpus), copying size bytes (at most DefaultSize) per
// pair. It never fails: problems are recorded in the report, per pair where they
// are per pair. When the probe has not finished after timeout it returns what it
// has, naming the pair in flight in Hung; the stuck driver call is abandoned
// with its goroutine, for the process to end.
func Run(gpus []*pcie.Device, size uint64, timeout time.Duration) *check.ProbeReport {
	size = min(size, DefaultSize)
	if len(gpus) < 2 {
		return &check.ProbeReport{Size: size, Pairs: []check.ProbePair{}, Skipped: "fewer than two GPUs"}
	}
	pr := &progress{rep: check.ProbeReport{Size: size, Pairs: []check.ProbePair{}}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runAll(pr, gpus, size)
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		pr.mu.Lock()
		defer pr.mu.Unlock()
		rep := pr.rep
		rep.Pairs = slices.Clone(rep.Pairs)
		rep.Hung = fmt.Sprintf("%s did not finish within %s", pr.current, timeout)
		return &rep
	}
	return &pr.rep
}

// progress is the probe's report as it grows, shared with Run's watchdog.
type progress struct {
	mu      sync.Mutex
	rep     check.ProbeReport
	current string // the step in flight, for a hang
}

func (p *progress) step(s string) {
	p.mu.Lock()
	p.current = s
	p.mu.Unlock()
}

// runAll is probeAll; tests replace it to exercise the watchdog.
var runAll = probeAll

// probeAll runs the probe on one locked OS thread: the driver's current context
// is per thread.
func probeAll(pr *progress, gpus []*pcie.Device, size uint64) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pr.step("opening the GPUs")
	ctxs, err := contexts(gpus)
	defer func() {
		for _, c := range ctxs {
			if c != nil {
				_ = c.Release()
			}
		}
	}()
	if err != nil {
		pr.mu.Lock()
		pr.rep.Skipped = skipReason(err)
		pr.mu.Unlock()
		return
	}
	for i := range gpus {
		for j := range gpus {
			if i == j {
				continue
			}
			pr.step(fmt.Sprintf("the copy gpu%d->gpu%d", i, j))
			p := check.ProbePair{Src: i, Dst: j, SrcBDF: gpus[i].Address, DstBDF: gpus[j].Address, Mismatch: -1}
			if ctxs[i] == nil || ctxs[j] == nil {
				p.Err = "no CUDA device at this PCI address (CUDA_VISIBLE_DEVICES?)"
			} else if err := probePair(&p, ctxs[i], ctxs[j], size); err != nil {
				p.Err = err.Error()
			}
			pr.mu.Lock()
			pr.rep.Pairs = append(pr.rep.Pairs, p)
			pr.mu.Unlock()
		}
	}
}

func skipReason(err error) string {
	switch {
	case errors.Is(err, cuda.ErrNotSupported):
		return "built without CUDA support (cgo disabled)"
	case errors.Is(err, cuda.ErrNoDriver):
		return "no CUDA driver (libcuda.so.1)"
	}
	return err.Error()
}

// contexts retains the primary context of the CUDA device at each GPU's address;
// the entry is nil for a GPU CUDA does not show.
func contexts(gpus []*pcie.Device) ([]*cuda.Context, error) {
	ctxs := make([]*cuda.Context, len(gpus))
	n, err := cuda.DeviceCount()
	if err != nil {
		return ctxs, err
	}
	for ord := range n {
		dev, err := cuda.DeviceGet(ord)
		if err != nil {
			return ctxs, err
		}
		addr, err := dev.PCIBusID()
		if err != nil {
			return ctxs, err
		}
		for i, g := range gpus {
			if g.Address != addr {
				continue
			}
			if ctxs[i], err = dev.RetainPrimaryContext(); err != nil {
				return ctxs, err
			}
		}
	}
	return ctxs, nil
}

// pattern fills b with bytes that differ from their neighbours, from zero and
// from the pattern of any other pair, so that a stale, zeroed or misrouted
// buffer never matches.
func pattern(b []byte, seed byte) {
	for i := range b {
		b[i] = byte(i*131+i>>9) ^ seed ^ 0x5a
	}
}

// firstDiff returns the first offset where a and b differ, -1 if none.
func firstDiff(a, b []byte) int64 {
	for i := range a {
		if a[i] != b[i] {
			return int64(i)
		}
	}
	return -1
}

// probePair copies size bytes from src to dst over peer access, verifies them
// on dst (a copy within dst, then to the host) and directly through the host,
// and measures the bandwidth.
func probePair(p *check.ProbePair, src, dst *cuda.Context, size uint64) (err error) {
	ok, err := dst.Device().CanAccessPeer(src.Device())
	if err != nil {
		return err
	}
	if !ok {
		return nil
	}
	p.PeerAccess = true
	if err := dst.EnablePeerAccess(src); err != nil {
		return err
	}
	var frees []func() error
	defer func() {
		for _, f := range frees {
			if ferr := f(); ferr != nil && err == nil {
				err = ferr
			}
		}
	}()
	alloc := func(c *cuda.Context) (uint64, error) {
		ptr, err := c.MemAlloc(size)
		if err == nil {
			frees = append(frees, func() error { return c.MemFree(ptr) })
		}
		return ptr, err
	}
	srcBuf, err := alloc(src)
	if err != nil {
		return err
	}
	dstBuf, err := alloc(dst)
	if err != nil {
		return err
	}
	ownerBuf, err := alloc(dst)
	if err != nil {
		return err
	}
	want := make([]byte, size)
	pattern(want, byte(p.Src*16+p.Dst))
	if err := src.MemcpyHtoD(srcBuf, want); err != nil {
		return err
	}
	if err := dst.MemsetD8(dstBuf, 0, size); err != nil {
		return err
	}
	if err := dst.Synchronize(); err != nil {
		return err
	}
	if err := timePeerCopies(p, src, dst, srcBuf, dstBuf, size); err != nil {
		return err
	}
	return verifyPair(p, dst, want, dstBuf, ownerBuf)
}

// timePeerCopies copies size bytes from srcBuf on src to dstBuf on dst once, to
// set up the peer mappings, then times repeats copies for p's bandwidth.
func timePeerCopies(p *check.ProbePair, src, dst *cuda.Context, srcBuf, dstBuf, size uint64) error {
	if err := cuda.MemcpyPeer(dst, dstBuf, src, srcBuf, size); err != nil {
		return err
	}
	if err := dst.Synchronize(); err != nil {
		return err
	}
	start := time.Now()
	for range repeats {
		if err := cuda.MemcpyPeer(dst, dstBuf, src, srcBuf, size); err != nil {
			return err
		}
	}
	if err := dst.Synchronize(); err != nil {
		return err
	}
	if d := time.Since(start); d > 0 {
		p.BytesPerSecond = float64(size*repeats) / d.Seconds()
	}
	return nil
}

// verifyPair checks that dstBuf on dst holds want, read through the host and
// by the owner (a copy into ownerBuf inside dst, then to the host), and records
// the first mismatch in p.
func verifyPair(p *check.ProbePair, dst *cuda.Context, want []byte, dstBuf, ownerBuf uint64) error {
	size := uint64(len(want))
	got := make([]byte, size)
	if err := dst.MemcpyDtoH(got, dstBuf); err != nil {
		return err
	}
	host := firstDiff(want, got)
	p.HostVerified = host < 0
	// The owner reads what arrived: a copy inside dst, then to the host.
	if err := cuda.MemcpyPeer(dst, ownerBuf, dst, dstBuf, size); err != nil {
		return err
	}
	if err := dst.Synchronize(); err != nil {
		return err
	}
	clear(got)
	if err := dst.MemcpyDtoH(got, ownerBuf); err != nil {
		return err
	}
	owner := firstDiff(want, got)
	p.Verified = owner < 0
	switch {
	case host >= 0:
		p.Mismatch = host
	case owner >= 0:
		p.Mismatch = owner
	}
	return nil
}
