//go:build linux

package main

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/p2pkit/p2pkit/gdrcopy"
)

// hostVA is the made-up device address the host mapping is pinned at; the
// exporter ignores it. It only has to be page aligned.
const hostVA = 1 << 40

// memfdExporter is a gdrcopy.Exporter that exports no GPU memory: it hands
// over a memfd of the requested size as the dma-buf, so that the DMA-BUF
// backend maps ordinary write-back host memory, as a write-combining
// mapping, behind the whole Mapping API.
type memfdExporter struct{}

func (memfdExporter) ExportDMABUF(_, size uint64, _ bool) (gdrcopy.DMABUF, error) {
	fd, err := unix.MemfdCreate("gdrbench-host", unix.MFD_CLOEXEC)
	if err != nil {
		return gdrcopy.DMABUF{}, fmt.Errorf("memfd: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return gdrcopy.DMABUF{}, errors.Join(fmt.Errorf("memfd of %d bytes: %w", size, err), unix.Close(fd))
	}
	return gdrcopy.DMABUF{FD: fd}, nil
}

// openHostMapping maps size bytes of host memory through gdrcopy (see
// memfdExporter). Closing the Driver releases the buffer and the mapping.
func openHostMapping(size int) (*gdrcopy.Driver, *gdrcopy.Mapping, error) {
	d, err := gdrcopy.OpenOptions(gdrcopy.Options{DMABUF: memfdExporter{}, ForceDMABUF: true})
	if err != nil {
		return nil, nil, err
	}
	b, err := d.Pin(hostVA, uint64(size), gdrcopy.PinDefault)
	if err != nil {
		return nil, nil, errors.Join(err, d.Close())
	}
	m, err := b.Map()
	if err != nil {
		return nil, nil, errors.Join(err, d.Close())
	}
	return d, m, nil
}
