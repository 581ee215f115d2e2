package cuda_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/internal/cuda"
)

// requireGPU returns the number of CUDA devices, or skips the test when this
// machine (or this build) has none. Under P2PKIT_REQUIRE_HW=1 it fails instead.
func requireGPU(t *testing.T, min int) int {
	t.Helper()
	n, err := cuda.DeviceCount()
	if err == nil && n < min {
		err = fmt.Errorf("%d CUDA device(s), test needs %d", n, min)
	}
	if err != nil {
		if os.Getenv("P2PKIT_REQUIRE_HW") == "1" {
			t.Fatalf("P2PKIT_REQUIRE_HW=1 but: %v", err)
		}
		t.Skipf("no GPU: %v", err)
	}
	return n
}

func TestErrorString(t *testing.T) {
	tests := []struct {
		err      *cuda.Error
		want     string
		noDevice bool
	}{
		{&cuda.Error{Func: "cuMemAlloc_v2", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY"}, "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2)", false},
		{&cuda.Error{Func: "cuInit", Code: cuda.ErrorNoDevice, Name: "CUDA_ERROR_NO_DEVICE"}, "cuda: cuInit: CUDA_ERROR_NO_DEVICE (100)", true},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
		wrapped := fmt.Errorf("probe: %w", tt.err)
		if got := errors.Is(wrapped, cuda.ErrNoDevice); got != tt.noDevice {
			t.Errorf("errors.Is(%v, ErrNoDevice) = %v, want %v", tt.err, got, tt.noDevice)
		}
	}
}

// TestInit checks that Init either works or fails with one of the documented
// errors, whatever the machine.
func TestInit(t *testing.T) {
	err := cuda.Init()
	if err != nil {
		if !errors.Is(err, cuda.ErrNoDriver) && !errors.Is(err, cuda.ErrNotSupported) && !errors.Is(err, cuda.ErrNoDevice) {
			t.Fatalf("Init() = %v, want nil or ErrNoDriver/ErrNotSupported/ErrNoDevice", err)
		}
		if _, err2 := cuda.DeviceCount(); !errors.Is(err2, err) {
			t.Errorf("DeviceCount after failed Init = %v, want %v", err2, err)
		}
		requireGPU(t, 1)
		return
	}
	v, err := cuda.DriverVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v < 11000 {
		t.Errorf("DriverVersion() = %d, want >= 11000 (CUDA 11)", v)
	}
	t.Logf("CUDA driver version %d.%d", v/1000, v%1000/10)
}

func TestDeviceAttributes(t *testing.T) {
	n := requireGPU(t, 1)
	for i := range n {
		d, err := cuda.DeviceGet(i)
		if err != nil {
			t.Fatal(err)
		}
		name, err := d.Name()
		if err != nil || name == "" {
			t.Errorf("device %d: Name() = %q, %v", i, name, err)
		}
		addr, err := d.PCIBusID()
		if err != nil {
			t.Fatalf("device %d: PCIBusID: %v", i, err)
		}
		attr := func(a cuda.Attribute) int {
			t.Helper()
			v, err := d.Attribute(a)
			if err != nil {
				t.Fatalf("device %d: %v", i, err)
			}
			return v
		}
		// The bus id string and the PCI attributes come from different calls;
		// they must agree.
		got := [3]int{attr(cuda.AttrPCIDomainID), attr(cuda.AttrPCIBusID), attr(cuda.AttrPCIDeviceID)}
		want := [3]int{int(addr.Domain), int(addr.Bus), int(addr.Device)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("device %d (%s): PCI attributes disagree with bus id (-want +got):\n%s", i, addr, diff)
		}
		if major := attr(cuda.AttrComputeCapabilityMajor); major < 3 {
			t.Errorf("device %d: compute capability major %d", i, major)
		}
		for _, a := range []cuda.Attribute{cuda.AttrGPUDirectRDMASupported, cuda.AttrDMABufSupported, cuda.AttrUnifiedAddressing} {
			if v := attr(a); v != 0 && v != 1 {
				t.Errorf("device %d: attribute %d = %d, want 0 or 1", i, a, v)
			}
		}
		mem, err := d.TotalMem()
		if err != nil || mem == 0 {
			t.Errorf("device %d: TotalMem() = %d, %v", i, mem, err)
		}
		t.Logf("GPU %d: %s at %s, cc %d.%d, GPUDirect RDMA %d, dma-buf %d, %d MiB",
			i, name, addr, attr(cuda.AttrComputeCapabilityMajor), attr(cuda.AttrComputeCapabilityMinor),
			attr(cuda.AttrGPUDirectRDMASupported), attr(cuda.AttrDMABufSupported), mem>>20)
	}
}

// pattern returns n bytes that differ at every offset modulo 251 and with seed.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i%251) ^ seed
	}
	return b
}

// retain returns device i's primary context, released at the end of the test.
func retain(t *testing.T, i int) *cuda.Context {
	t.Helper()
	d, err := cuda.DeviceGet(i)
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := d.RetainPrimaryContext()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ctx.Release(); err != nil {
			t.Error(err)
		}
	})
	return ctx
}

// alloc allocates size bytes on ctx, freed at the end of the test.
func alloc(t *testing.T, ctx *cuda.Context, size uint64) uint64 {
	t.Helper()
	p, err := ctx.MemAlloc(size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ctx.MemFree(p); err != nil {
			t.Error(err)
		}
	})
	return p
}

func TestMemRoundTrip(t *testing.T) {
	requireGPU(t, 1)
	ctx := retain(t, 0)
	pinned, err := ctx.HostAlloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := ctx.HostFree(pinned); err != nil {
			t.Error(err)
		}
	}()
	for _, size := range []int{1, 7, 4096, 65536 + 13, 1 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			p := alloc(t, ctx, uint64(size))
			if err := ctx.SetSyncMemops(p); err != nil {
				t.Fatal(err)
			}
			want := pattern(size, byte(size))
			if err := ctx.MemcpyHtoD(p, want); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, size)
			if err := ctx.MemcpyDtoH(got, p); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("pageable HtoD/DtoH round trip of %d bytes differs", size)
			}

			if err := ctx.MemsetD8(p, 0xa5, uint64(size)); err != nil {
				t.Fatal(err)
			}
			host := pinned[:size]
			if err := ctx.MemcpyDtoH(host, p); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(host, bytes.Repeat([]byte{0xa5}, size)) {
				t.Fatalf("MemsetD8 then pinned DtoH of %d bytes: not all 0xa5", size)
			}
		})
	}
}

func TestPeerCopy(t *testing.T) {
	requireGPU(t, 2)
	d0, _ := cuda.DeviceGet(0)
	d1, _ := cuda.DeviceGet(1)
	ok01, err := d0.CanAccessPeer(d1)
	if err != nil {
		t.Fatal(err)
	}
	ok10, err := d1.CanAccessPeer(d0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("peer access 0->1 %v, 1->0 %v", ok01, ok10)
	ctx0, ctx1 := retain(t, 0), retain(t, 1)
	if ok01 {
		if err := ctx0.EnablePeerAccess(ctx1); err != nil {
			t.Fatal(err)
		}
		// A second enable must be harmless.
		if err := ctx0.EnablePeerAccess(ctx1); err != nil {
			t.Fatalf("second EnablePeerAccess: %v", err)
		}
	}
	if ok10 {
		if err := ctx1.EnablePeerAccess(ctx0); err != nil {
			t.Fatal(err)
		}
	}

	const size = 4<<20 + 17
	ctxs := [2]*cuda.Context{ctx0, ctx1}
	bufs := [2]uint64{alloc(t, ctx0, size), alloc(t, ctx1, size)}
	for _, dir := range [][2]int{{0, 1}, {1, 0}} {
		src, dst := dir[0], dir[1]
		t.Run(fmt.Sprintf("%d_to_%d", src, dst), func(t *testing.T) {
			want := pattern(size, byte(0x10*src+dst))
			if err := ctxs[src].MemcpyHtoD(bufs[src], want); err != nil {
				t.Fatal(err)
			}
			if err := ctxs[dst].MemsetD8(bufs[dst], 0, size); err != nil {
				t.Fatal(err)
			}
			if err := cuda.MemcpyPeer(ctxs[dst], bufs[dst], ctxs[src], bufs[src], size); err != nil {
				t.Fatal(err)
			}
			for _, c := range ctxs {
				if err := c.Synchronize(); err != nil {
					t.Fatal(err)
				}
			}
			for _, side := range []int{dst, src} {
				got := make([]byte, size)
				if err := ctxs[side].MemcpyDtoH(got, bufs[side]); err != nil {
					t.Fatal(err)
				}
				if i := firstDiff(got, want); i >= 0 {
					t.Errorf("GPU %d after peer copy %d->%d: byte %d = %#x, want %#x", side, src, dst, i, got[i], want[i])
				}
			}
		})
	}
}

// firstDiff returns the first index where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// ExportDMABUF returns a dma-buf descriptor for a host-page aligned range
// of an allocation; the caller closes it.
func TestExportDMABUF(t *testing.T) {
	requireGPU(t, 1)
	ctx := retain(t, 0)
	const size = 2 << 20
	raw := alloc(t, ctx, 2*size)
	ptr := (raw + size - 1) &^ (size - 1)
	fd, err := ctx.ExportDMABUF(ptr, size, false)
	if errors.Is(err, cuda.ErrNotSupported) {
		t.Skipf("this driver cannot export dma-bufs: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if fd < 0 {
		t.Fatalf("ExportDMABUF returned descriptor %d", fd)
	}
	if err := os.NewFile(uintptr(fd), "dma-buf").Close(); err != nil {
		t.Errorf("close the dma-buf: %v", err)
	}
}
