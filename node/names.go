package node

import (
	"errors"
	"fmt"
	"strings"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/internal/pciids"
	"github.com/p2pkit/p2pkit/pcie"
)

// loadNames starts loading the host's pci.ids (path, or the usual places when
// empty; its bytes count on m) in the background, so that it overlaps reading sysfs. The function it
// returns waits for the load and names the devices of t; a missing database is
// reported and leaves names empty.
func loadNames(m *hostfs.Meter, path string) (annotate func(t *pcie.Topology) error) {
	type result struct {
		db  *pciids.DB
		err error
	}
	done := make(chan result, 1)
	go func() {
		db, err := pciids.Load(m, path)
		done <- result{db, err}
	}()
	return func(t *pcie.Topology) error {
		r := <-done
		if errors.Is(r.err, pciids.ErrNoDatabase) && path == "" {
			return fmt.Errorf("device names unavailable: no pci.ids on this host (install the pci.ids, pciutils or hwdata package, or pass --pci-ids FILE): %w", r.err)
		}
		if r.err != nil {
			return r.err
		}
		pciids.Annotate(t, r.db)
		return nil
	}
}

// NameGPUs names the GPUs that pci.ids did not (no database on the host, or one
// older than the GPU) with the name NVML gives them ("NVIDIA H200"). When pci.ids
// named the vendor ("NVIDIA Corporation"), the vendor's word that NVML repeats is
// dropped, so the product reads "NVIDIA Corporation H200". It does nothing without
// NVML facts; call it after setting GPU.
func (n *Node) NameGPUs() {
	if n.GPU == nil {
		return
	}
	for _, d := range n.Topology.GPUs() {
		if d.DeviceName != "" {
			continue
		}
		if g := n.gpuAt(d.Address); g != nil && g.Name != "" {
			d.DeviceName = g.Name
			vendorWord, _, _ := strings.Cut(d.VendorName, " ")
			if rest, ok := strings.CutPrefix(g.Name, vendorWord+" "); ok && vendorWord != "" && rest != "" {
				d.DeviceName = rest
			}
		}
	}
}
