package check

// checkVirtualization reports whether the kernel runs under a hypervisor, from
// the x86 "hypervisor" CPU flag (CPUID.1:ECX[31], printed by show_cpuinfo in
// arch/x86/kernel/cpu/proc.c). It is informational: in a VM the PCIe tree, link
// widths, ACS and NUMA nodes the guest sees are the hypervisor's virtual
// topology, so the link, NUMA and path-class checks say so, and GPU P2P depends
// on the hypervisor (NCCL's troubleshooting guide: the host keeps ACS on for
// isolation and P2P needs ATS on the devices).
func checkVirtualization(f *Facts) Result {
	r := Result{Refs: []string{docRef("virtualization"), "linux arch/x86/kernel/cpu/proc.c show_cpuinfo", urlNCCLTrouble}}
	cpu := f.Node.Platform.CPU
	if cpu == nil {
		r.Status, r.Summary = Skip, "/proc/cpuinfo unreadable: cannot tell bare metal from a VM"
		return r
	}
	if cpu.Hypervisor() {
		r.Status = Pass
		r.Observed = "virtual machine"
		r.Summary = "virtual machine (hypervisor CPU flag): pcie_link, numa_node, gpu_nic_affinity and acs_path describe the virtual topology"
		r.Evidence = []Evidence{{Source: "/proc/cpuinfo flags", Value: "hypervisor"}}
		return r
	}
	if cpu.VendorID == "" {
		r.Status, r.Summary = Skip, "not an x86 CPU: /proc/cpuinfo has no hypervisor flag to tell a VM by"
		return r
	}
	r.Status = Pass
	r.Observed = "bare metal"
	r.Summary = "bare metal (no hypervisor CPU flag)"
	r.Evidence = []Evidence{{Source: "/proc/cpuinfo flags", Value: "no hypervisor flag"}}
	return r
}
