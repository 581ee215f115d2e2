package provision

import (
	"errors"
	"fmt"
	"strings"

	"github.com/p2pkit/p2pkit/pcie"
)

// ErrModeUnknown is returned (wrapped) by DetectMode when the NICs do not tell.
var ErrModeUnknown = errors.New("provision: cannot tell bare metal from a virtualization host")

// DetectMode decides what the plan is for from the ATS capability of the ConnectX
// and BlueField NIC physical functions among devs, as rdma-core's rdma_topo decides
// it: ConnectX firmware shows the capability only with mlxconfig ATS_ENABLED=true,
// which is off by default and what NVIDIA's guides set for VMs (NVIDIA AI
// Enterprise, "ATS and ACS configuration"). Every such NIC has it: a virtualization
// host; none has it, or there is no such NIC: bare metal. On the Data Direct and NUMA
// shapes rdma_topo plans no virtualization and neither does this. NICs that disagree,
// or a capability list that was not read, return ErrModeUnknown: say which with
// --virt-host or --bare-metal.
func DetectMode(devs []*pcie.Device, shapes []Shape) (Mode, string, error) {
	for _, s := range shapes {
		if s.Kind == ShapeDataDirect || s.Kind == ShapeNUMA {
			return ModeBareMetal, fmt.Sprintf("NVIDIA %s shape, which has no virtualization-host plan", s.Kind), nil
		}
	}
	var with, without, unread []string
	for _, d := range devs {
		if role(d) != roleCXNIC || d.IsVF() {
			continue
		}
		ats, known := d.ATSState()
		switch {
		case !known:
			unread = append(unread, d.Address.String())
		case ats != nil:
			with = append(with, d.Address.String())
		default:
			without = append(without, d.Address.String())
		}
	}
	switch {
	case len(unread) > 0:
		return "", "", fmt.Errorf("%w: the ATS capability of %s was not read (run as root), say --virt-host or --bare-metal",
			ErrModeUnknown, strings.Join(unread, ", "))
	case len(with) > 0 && len(without) > 0:
		return "", "", fmt.Errorf("%w: NICs %s have the ATS capability and %s do not, say --virt-host or --bare-metal",
			ErrModeUnknown, strings.Join(with, ", "), strings.Join(without, ", "))
	case len(with) > 0:
		return ModeVirtHost, fmt.Sprintf("the ConnectX NICs have the ATS capability (mlxconfig ATS_ENABLED=true): %s",
			strings.Join(with, ", ")), nil
	case len(without) > 0:
		return ModeBareMetal, "no ConnectX NIC has the ATS capability", nil
	}
	return ModeBareMetal, "no ConnectX NIC to tell a virtualization host by", nil
}
