package main

import (
	"fmt"
	"io"

	"github.com/p2pkit/p2pkit/internal/cuda"
)

// gpuPageSize is the GPU page gdrdrv pins and maps in (GPU_PAGE_SIZE, 64 KiB).
const gpuPageSize = 64 << 10

// gpuInfo names one CUDA device, as the gdrcopy tools list them.
type gpuInfo struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	BusID string `json:"bus_id"`
}

// listGPUs returns every CUDA device.
func listGPUs() ([]gpuInfo, error) {
	n, err := cuda.DeviceCount()
	if err != nil {
		return nil, err
	}
	gpus := make([]gpuInfo, 0, n)
	for i := range n {
		d, err := cuda.DeviceGet(i)
		if err != nil {
			return nil, err
		}
		g := gpuInfo{Index: i}
		if g.Name, err = d.Name(); err != nil {
			return nil, err
		}
		a, err := d.PCIBusID()
		if err != nil {
			return nil, err
		}
		g.BusID = a.String()
		gpus = append(gpus, g)
	}
	return gpus, nil
}

func writeGPUs(w io.Writer, gpus []gpuInfo) {
	for _, g := range gpus {
		fmt.Fprintf(w, "GPU id:%d; name: %s; Bus id: %s\n", g.Index, g.Name, g.BusID)
	}
}

// deviceMem is device memory for a benchmark: a CUDA allocation aligned to a
// GPU page with SYNC_MEMOPS set, as gdrcopy's tests prepare it.
type deviceMem struct {
	ctx  *cuda.Context
	base uint64 // what cuMemAlloc returned; 0 once freed
	VA   uint64 // base rounded up to a GPU page
	Size uint64
}

// allocDevice allocates size bytes on GPU dev. gdrdrv maps only from a 64 KiB
// boundary, so it over-allocates by a page less one byte and rounds up.
func allocDevice(dev int, size uint64) (*deviceMem, error) {
	d, err := cuda.DeviceGet(dev)
	if err != nil {
		return nil, err
	}
	ctx, err := d.RetainPrimaryContext()
	if err != nil {
		return nil, err
	}
	base, err := ctx.MemAlloc(size + gpuPageSize - 1)
	if err != nil {
		ctx.Release()
		return nil, err
	}
	m := &deviceMem{ctx: ctx, base: base, VA: (base + gpuPageSize - 1) &^ (gpuPageSize - 1), Size: size}
	if err := ctx.SetSyncMemops(base); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// Close frees the memory and releases the context.
func (m *deviceMem) Close() error {
	if m.ctx == nil {
		return nil
	}
	var err error
	if m.base != 0 {
		err = m.ctx.MemFree(m.base)
	}
	if rerr := m.ctx.Release(); err == nil {
		err = rerr
	}
	m.ctx = nil
	return err
}

// memcpyBaseline times cuMemcpyHtoD and cuMemcpyDtoH of each size between
// page-locked host memory (cuMemHostAlloc) and m: the cudaMemcpy numbers GDRCopy
// is compared with. HtoD runs wIters times, DtoH rIters times.
func memcpyBaseline(m *deviceMem, sizes []int, wIters, rIters int) (htod, dtoh []latency, err error) {
	largest := 0
	for _, s := range sizes {
		largest = max(largest, s)
	}
	host, err := m.ctx.HostAlloc(largest)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if ferr := m.ctx.HostFree(host); err == nil {
			err = ferr
		}
	}()
	for _, size := range sizes {
		buf := host[:size]
		h, err := measureLatency(wIters, func() error { return m.ctx.MemcpyHtoD(m.VA, buf) })
		if err != nil {
			return nil, nil, err
		}
		d, err := measureLatency(rIters, func() error { return m.ctx.MemcpyDtoH(buf, m.VA) })
		if err != nil {
			return nil, nil, err
		}
		htod, dtoh = append(htod, h), append(dtoh, d)
	}
	return htod, dtoh, nil
}
