package check

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// checkNUMANode flags GPUs and NICs whose numa_node is -1 on a machine with more
// than one NUMA node: the firmware gave no proximity (ACPI _PXM), so NCCL, which
// places its CPU nodes by numa_node, and CPU pinning cannot place work next to
// the device (drivers/pci/pci-sysfs.c numa_node_show). On a single-node machine
// and in VMs -1 is normal. A numa_node file missing on some functions while
// others have one is unknown; missing everywhere means a kernel without NUMA.
func checkNUMANode(f *Facts) Result {
	r := Result{Refs: []string{docRef("numa_node"), "linux drivers/pci/pci-sysfs.c numa_node_show", refSysfs + " (numa_node)"}}
	nodes := map[int]bool{}
	anyAttr := false
	for _, d := range f.Node.Topology.Devices {
		if d.NUMANode != nil {
			anyAttr = true
			if *d.NUMANode >= 0 {
				nodes[*d.NUMANode] = true
			}
		}
	}
	devs := slices.Concat(f.GPUs(), f.NICs())
	if len(devs) == 0 {
		r.Status, r.Summary = Skip, "no GPU or RDMA NIC"
		return r
	}
	if !anyAttr {
		r.Status, r.Summary = Skip, "no PCI function has a numa_node file: a kernel built without NUMA"
		return r
	}
	var missing, absent []string
	for _, d := range devs {
		v := "absent"
		if d.NUMANode != nil {
			v = strconv.Itoa(*d.NUMANode)
		}
		r.Evidence = append(r.Evidence, Evidence{Source: "/sys/bus/pci/devices/" + d.Address.String() + "/numa_node", Value: v})
		switch {
		case d.NUMANode == nil:
			absent = append(absent, d.Address.String())
		case *d.NUMANode < 0:
			missing = append(missing, d.Address.String())
		}
	}
	r.Observed = fmt.Sprintf("%d NUMA node(s) seen on PCI functions; %d of %d GPUs/NICs with numa_node -1, %d without the file", len(nodes), len(missing), len(devs), len(absent))
	switch {
	case len(missing) > 0 && len(nodes) > 1:
		r.Status = Warn
		r.Summary = fmt.Sprintf("%d GPU(s)/NIC(s) have numa_node -1 on a multi-node machine", len(missing))
		r.Subjects = missing
		r.Expected = "numa_node >= 0 on every GPU and NIC"
		r.Remediation = []string{"update the BIOS/ACPI tables (_PXM, SRAT) or enable NUMA (sub-NUMA clustering settings) in the BIOS; meanwhile pin with NVML CPU affinity"}
	case len(absent) > 0:
		// Placement decides how fast GPUDirect RDMA is, not whether it works.
		r.Status, r.PerformanceOnly = Unknown, true
		r.Summary = fmt.Sprintf("numa_node could not be read for %d GPU(s)/NIC(s)", len(absent))
		r.Subjects = absent
		r.Remediation = []string{"read /sys/bus/pci/devices/<bdf>/numa_node of " + strings.Join(absent, ", ") + " (world-readable; absent from this capture)"}
	case len(missing) > 0 && f.Hypervisor():
		r.Status, r.Summary = Pass, "numa_node -1 in a VM: the hypervisor exposes no NUMA proximity (virtual topology)"
	case len(missing) > 0:
		r.Status, r.Summary = Pass, "numa_node -1 on a machine with no second NUMA node seen"
	default:
		r.Status, r.Summary = Pass, "every GPU and NIC has a NUMA node"
	}
	return r
}
