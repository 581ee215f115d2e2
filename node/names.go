package node

import (
	"errors"
	"fmt"
	"strings"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/internal/pciids"
	"github.com/p2pkit/p2pkit/pcie"
)

// nameDevices names the devices of t from the host's pci.ids (path, or the usual
// places when empty; its bytes count on m), keeping of it only what t's devices need
// (pciids.LoadFor). A missing database is reported and leaves names empty.
func nameDevices(m *hostfs.Meter, path string, t *pcie.Topology) error {
	db, err := pciids.LoadFor(m, path, t)
	if errors.Is(err, pciids.ErrNoDatabase) && path == "" {
		return fmt.Errorf("device names unavailable: no pci.ids on this host (install the pci.ids, pciutils or hwdata package, or pass --pci-ids FILE): %w", err)
	}
	if err != nil {
		return err
	}
	pciids.Annotate(t, db)
	return nil
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
