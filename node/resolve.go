package node

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/matrix"
	"github.com/p2pkit/p2pkit/pcie"
)

// ErrNoSuchDevice is returned (wrapped) when a device name matches nothing.
var ErrNoSuchDevice = errors.New("no such device")

// ErrAmbiguous is returned (wrapped) when a name means two different functions.
var ErrAmbiguous = errors.New("ambiguous device name")

// Resolve finds a function by any name an operator uses for it: a PCI address
// (0000:41:00.0 or 41:00.0), a label `p2pcheck matrix` prints (GPU0, NIC1, NVME0,
// ACC0, MEM0, in any case; GPUs are numbered in PCI address order, as nvidia-smi
// numbers them), a network interface (ib0, eth2), an RDMA device (mlx5_0) or an
// NVMe controller (nvme1), the last three as sysfs links them to the function.
func (n *Node) Resolve(name string) (*pcie.Device, error) {
	t := n.Topology
	if a, err := pcie.ParseAddress(name); err == nil {
		if d := t.Device(a); d != nil {
			return d, nil
		}
		return nil, fmt.Errorf("%w: no PCI function %s", ErrNoSuchDevice, a)
	}
	labels := matrix.Label(t.Devices)
	label, isLabel := matrix.Find(labels, name)
	for _, d := range t.Devices {
		if slices.Contains(d.NetDevs, name) || slices.Contains(d.RDMADevs, name) || slices.Contains(d.NVMeDevs, name) {
			// The kernel's nvme1 need not be the matrix's NVME1.
			if isLabel && label.Device != d {
				return nil, fmt.Errorf("%w: %s names %s in sysfs but matrix label %s is %s; use the PCI address", ErrAmbiguous, name, d.Address, label.Label, label.Device.Address)
			}
			return d, nil
		}
	}
	if isLabel {
		return label.Device, nil
	}
	if prefix, ok := labelPrefix(name); ok {
		count := 0
		for _, e := range labels {
			if e.Role.Prefix() == prefix {
				count++
			}
		}
		if count == 0 {
			return nil, fmt.Errorf("%w: %s (this machine has no %s device)", ErrNoSuchDevice, name, prefix)
		}
		return nil, fmt.Errorf("%w: %s (this machine has %d %s devices, %s0 to %s%d)", ErrNoSuchDevice, name, count, prefix, prefix, prefix, count-1)
	}
	return nil, fmt.Errorf("%w: %q is not a PCI address, matrix label (GPU0, NIC0, NVME0, ACC0, MEM0), network interface, RDMA device or NVMe controller here", ErrNoSuchDevice, name)
}

// labelPrefix returns the role prefix of a name shaped like a matrix label
// ("gpu7" gives "GPU"), or false.
func labelPrefix(name string) (string, bool) {
	up := strings.ToUpper(name)
	for _, r := range []matrix.Role{matrix.GPU, matrix.NIC, matrix.NVMe, matrix.Accelerator, matrix.P2PMem} {
		if rest, ok := strings.CutPrefix(up, r.Prefix()); ok {
			if i, err := strconv.Atoi(rest); err == nil && i >= 0 {
				return r.Prefix(), true
			}
		}
	}
	return "", false
}

// Interesting returns the functions p2pcheck reports on by default, the devices of
// interest of matrix.RoleOf (GPUs, NICs, NVMe controllers, accelerators, p2pmem
// providers; VFs left out), in address order.
func (n *Node) Interesting() []*pcie.Device {
	var out []*pcie.Device
	for _, e := range matrix.Label(n.Topology.Devices) {
		out = append(out, e.Device)
	}
	return out
}
