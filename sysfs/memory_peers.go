package sysfs

import (
	"errors"

	"github.com/p2pkit/p2pkit/hostfs"
)

// This file reads /sys/kernel/mm/memory_peers, where MOFED/DOCA ib_core lists its
// peer-memory clients (nvidia-peermem registers nv_mem).

const memoryPeers = "sys/kernel/mm/memory_peers"

// MemoryPeers reads /sys/kernel/mm/memory_peers/<name>/version, where MOFED/DOCA
// ib_core lists its peer-memory clients; NCCL looks for nv_mem and nv_mem_nc there
// to decide whether GPUDirect RDMA through nvidia-peermem is available. A client
// without a readable version maps to "" and, when the file exists, is reported in the
// error.
func (fsys FS) MemoryPeers() (map[string]string, error) {
	names, err := fsys.names(memoryPeers)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	var errs []error
	for _, n := range names {
		b, err := fsys.r.ReadFile(join(memoryPeers, n, "version"), attrLimit)
		if ok, err := hostfs.Optional(err); err != nil {
			errs = append(errs, err)
		} else if ok {
			m[n] = attrString(b)
		} else {
			m[n] = ""
		}
	}
	return m, errors.Join(errs...)
}
