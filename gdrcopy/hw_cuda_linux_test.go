//go:build linux && cgo

package gdrcopy

import (
	"bytes"
	"testing"

	"github.com/p2pkit/p2pkit/internal/cuda"
)

// CUDA is reachable only with cgo; this file is the only one that imports
// it, so a static test binary still builds and takes the P2PKIT_GDR_TEST_VA
// route.
func init() {
	cudaAlloc = allocCUDA
}

// allocCUDA allocates 64 KiB aligned device memory on GPU 0 the way
// gdrcopy's tests do: over-allocate by a GPU page, round the pointer up,
// and set CU_POINTER_ATTRIBUTE_SYNC_MEMOPS.
func allocCUDA(t *testing.T, size uint64) (devMem, error) {
	if err := initCUDA(); err != nil {
		return devMem{}, err
	}
	dev, err := cuda.DeviceGet(0)
	if err != nil {
		return devMem{}, err
	}
	ctx, err := dev.RetainPrimaryContext()
	if err != nil {
		return devMem{}, err
	}
	t.Cleanup(func() { _ = ctx.Release() })
	raw, err := ctx.MemAlloc(size + gpuPageSize - 1)
	if err != nil {
		return devMem{}, err
	}
	freed := false
	free := func() error {
		if freed {
			return nil
		}
		freed = true
		return ctx.MemFree(raw)
	}
	t.Cleanup(func() { _ = free() })
	if err := ctx.SetSyncMemops(raw); err != nil {
		return devMem{}, err
	}
	ptr := (raw + gpuPageSize - 1) &^ (gpuPageSize - 1)
	return devMem{ptr: ptr, size: size, free: free, read: ctx.MemcpyDtoH}, nil
}

const gpuPageSize = 64 << 10

// initCUDA initialises CUDA. The driver keeps descriptors open for the
// life of the process (its device nodes, an eventfd, pipes), which the
// leak check would take for leaks.
func initCUDA() error {
	err := cuda.Init()
	if err == nil {
		fdCheckOff = "CUDA was initialised and keeps its descriptors"
	}
	return err
}

// cudaExporter exports device memory of ctx's device through
// cuMemGetHandleForAddressRange.
type cudaExporter struct {
	ctx      *cuda.Context
	coherent bool
}

func (e cudaExporter) ExportDMABUF(ptr, size uint64, forcePCIe bool) (DMABUF, error) {
	fd, err := e.ctx.ExportDMABUF(ptr, size, forcePCIe)
	return DMABUF{FD: fd, Coherent: e.coherent}, err
}

// The DMA-BUF backend on a real GPU: the export must work; the CPU mapping
// either works (the copy then reaches the device) or fails with the clear
// error, as it does with drivers before CUDA 13.3 (errno 524).
func TestHWDMABUF(t *testing.T) {
	if err := initCUDA(); err != nil {
		skipOrFail(t, "no CUDA driver: %v", err)
	}
	dev, err := cuda.DeviceGet(0)
	if err != nil {
		skipOrFail(t, "no CUDA device: %v", err)
	}
	if v, err := dev.Attribute(cuda.AttrDMABufSupported); err != nil || v == 0 {
		skipOrFail(t, "device 0 cannot export dma-bufs (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = %d, %v)", v, err)
	}
	coherent, err := dev.Attribute(cuda.AttrPageableMemoryAccessUsesHostPageTables)
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := dev.RetainPrimaryContext()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ctx.Release() })
	const size = 2 << 20
	raw, err := ctx.MemAlloc(2 * size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ctx.MemFree(raw) })
	if ver, err := cuda.DriverVersion(); err == nil {
		t.Logf("CUDA driver version %d; device 0 coherent with the CPU: %t", ver, coherent != 0)
	}
	ptr := (raw + size - 1) &^ (size - 1)

	d, err := OpenOptions(Options{DMABUF: cudaExporter{ctx, coherent != 0}, ForceDMABUF: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := d.Close(); err != nil {
			t.Errorf("close driver: %v", err)
		}
	}()
	b, err := d.Pin(ptr, size, PinDefault)
	if err != nil {
		t.Fatalf("pin (export as dma-buf): %v", err)
	}
	t.Logf("exported %#x+%d as dma-buf descriptor %d", ptr, size, b.dmabuf.fd)
	m, err := b.Map()
	if err != nil {
		t.Logf("map: %v", err)
		checkDMABUFMmapError(t, err)
		if err := b.Close(); err != nil {
			t.Error(err)
		}
		return
	}
	data := bytes.Repeat([]byte("p2pkit dma-buf "), 4096)
	if err := m.CopyToDevice(4096, data); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if err := ctx.MemcpyDtoH(got, ptr+4096); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Error("cuMemcpyDtoH does not read what the dma-buf mapping wrote")
	}
	if err := b.Close(); err != nil {
		t.Error(err)
	}
}
