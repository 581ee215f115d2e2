package vmtest

import "fmt"

// ScaleTopology is a machine of the size class `make bench-topo` times, for timing on
// a real sysfs (cmd/livebench) rather than in any test: groups root ports, each with
// a switch whose two downstream ports hold an SR-IOV NVMe with vfs VFs enabled and an
// e1000e. With 8 groups of 120 VFs it has 1,008 functions besides QEMU's own.
func ScaleTopology(groups, vfs int) *Topology {
	t := &Topology{Name: fmt.Sprintf("scale-%dx%d", groups, vfs), CPU: "Skylake-Server",
		Doc: "root ports with a switch, an SR-IOV NVMe and an e1000e below each"}
	for i := range groups {
		pf := ep(NVMe, fmt.Sprintf("sriov_max_vfs=%d", vfs), fmt.Sprintf("sriov_vq_flexible=%d", 2*vfs),
			fmt.Sprintf("sriov_vi_flexible=%d", vfs), fmt.Sprintf("max_ioqpairs=%d", 2*vfs+2),
			fmt.Sprintf("msix_qsize=%d", vfs+1))
		pf.Subsys, pf.VFs = fmt.Sprintf("subsys%d", i), vfs
		t.Root = append(t.Root, rootPort(uint8(2+i), sw(dsp(pf), dsp(ep(E1000E)))))
	}
	return t
}
