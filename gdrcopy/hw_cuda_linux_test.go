//go:build linux && cgo

package gdrcopy

import (
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
	if err := cuda.Init(); err != nil {
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
