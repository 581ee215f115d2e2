package node

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/pcie"
)

// ErrNoSuchDevice is returned (wrapped) when a device name matches nothing.
var ErrNoSuchDevice = errors.New("no such device")

// Resolve finds a function by any name an operator uses for it: a PCI address
// (0000:41:00.0 or 41:00.0), a GPU index as nvidia-smi numbers them (gpu0: the
// GPUs in PCI address order), a network interface (ib0, eth2), an RDMA device
// (mlx5_0) or an NVMe controller (nvme1), the last three as sysfs links them to
// the function.
func (n *Node) Resolve(name string) (*pcie.Device, error) {
	t := n.Topology
	if a, err := pcie.ParseAddress(name); err == nil {
		if d := t.Device(a); d != nil {
			return d, nil
		}
		return nil, fmt.Errorf("%w: no PCI function %s", ErrNoSuchDevice, a)
	}
	if rest, ok := strings.CutPrefix(strings.ToLower(name), "gpu"); ok {
		if i, err := strconv.Atoi(rest); err == nil && i >= 0 {
			gpus := t.GPUs()
			if i < len(gpus) {
				return gpus[i], nil
			}
			return nil, fmt.Errorf("%w: %s (this machine has %d GPUs)", ErrNoSuchDevice, name, len(gpus))
		}
	}
	for _, d := range t.Devices {
		if slices.Contains(d.NetDevs, name) || slices.Contains(d.RDMADevs, name) || slices.Contains(d.NVMeDevs, name) {
			return d, nil
		}
	}
	return nil, fmt.Errorf("%w: %q is not a PCI address, gpuN, network interface, RDMA device or NVMe controller here", ErrNoSuchDevice, name)
}

// Interesting returns the functions p2pcheck reports on by default: GPUs, NICs,
// NVMe controllers, accelerators and p2pmem providers, in address order. VFs are
// left out; they follow their PF's verdicts except for ACS on the VF itself.
func (n *Node) Interesting() []*pcie.Device {
	var out []*pcie.Device
	for _, d := range n.Topology.Devices {
		if d.IsVF() {
			continue
		}
		if d.IsGPU() || d.IsNIC() || d.IsNVMe() || d.IsAccelerator() || d.P2PMem != nil {
			out = append(out, d)
		}
	}
	return out
}
