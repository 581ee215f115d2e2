package check

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/pcie"
)

// Sources of the relaxed-ordering rules.
const (
	refNVRegRO   = "NVIDIA/open-gpu-kernel-modules kernel-open/nvidia/nv-reg.h (EnablePCIERelaxedOrderingMode)"
	refNVRMRO    = "NVIDIA/open-gpu-kernel-modules src/nvidia/interface/nvrm_registry.h (RmSetPCIERelaxedOrdering)"
	refDevCtlRO  = "linux include/uapi/linux/pci_regs.h PCI_EXP_DEVCTL_RELAX_EN"
	refNCCLIBROx = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html (NCCL_IB_PCI_RELAXED_ORDERING)"
)

// checkRelaxedOrdering reports PCIe Relaxed Ordering on the GPUDirect RDMA paths,
// from the three places that decide it:
//   - the Enable Relaxed Ordering bit of Device Control (PCI_EXP_DEVCTL_RELAX_EN,
//     include/uapi/linux/pci_regs.h) of every GPU and RDMA NIC with a GPU-NIC
//     pair: a function may set the Relaxed Ordering attribute in its requests only
//     with it set (PCIe Base Specification, Device Control), and the kernel clears
//     it below root ports that mishandle it (pci_configure_relaxed_ordering in
//     drivers/pci/probe.c);
//   - the NVIDIA driver's EnablePCIERelaxedOrderingMode (/proc/driver/nvidia/params;
//     nv-reg.h: 1 sets the regkey RmSetPCIERelaxedOrdering to FORCE_ENABLE, so the
//     GPU sets the bit in all outbound memory writes) or RmSetPCIERelaxedOrdering
//     in RegistryDwords (nvrm_registry.h);
//   - NCCL_IB_PCI_RELAXED_ORDERING (NCCL's environment variables: 2, the default,
//     uses Relaxed Ordering for IB Verbs where available, 1 forces it, 0 turns it
//     off; NCCL says it can greatly help InfiniBand in virtual machines).
//
// Only an explicit ask that Device Control refuses warns (the driver forcing it
// on a GPU that forbids it, NCCL forcing it on a NIC that forbids it), and 0 in a
// VM; NCCL's default uses Relaxed Ordering only where the NIC allows it.
//
// Relaxed ordering decides how fast GPUDirect RDMA is, not whether it works, so
// the result is PerformanceOnly: a warning where the settings contradict each
// other, an unknown (that never counts) where Device Control was not read.
func checkRelaxedOrdering(f *Facts) Result {
	r := Result{PerformanceOnly: true, Refs: []string{docRef("pcie_relaxed_ordering"), refDevCtlRO,
		"linux drivers/pci/probe.c pci_configure_relaxed_ordering", refNVRegRO, refNVRMRO, refNCCLIBROx}}
	gpus, nics := f.NVIDIAGPUs(), f.NICs()
	if len(gpus) == 0 || len(nics) == 0 {
		r.Status, r.Summary = Skip, "no NVIDIA GPU and RDMA NIC pair: no GPUDirect RDMA path"
		return r
	}
	r.Status = Pass
	driverRO, driverWhy := f.driverRelaxedOrdering(&r)
	ncclRO := f.ncclSetting("NCCL_IB_PCI_RELAXED_ORDERING")
	if ncclRO != "" {
		r.Evidence = append(r.Evidence, Evidence{Source: "NCCL_IB_PCI_RELAXED_ORDERING", Value: ncclRO})
	}
	var unread, gpuOff, nicOff []string
	for _, d := range append(gpus, nics...) {
		ro := devCtlRO(d)
		v := "unread"
		switch {
		case ro == nil:
			unread = append(unread, d.Address.String())
		case *ro:
			v = "RlxdOrd+"
		case d.IsGPU():
			v, gpuOff = "RlxdOrd-", append(gpuOff, d.Address.String())
		default:
			v, nicOff = "RlxdOrd-", append(nicOff, d.Address.String())
		}
		r.Evidence = append(r.Evidence, Evidence{Source: "/sys/bus/pci/devices/" + d.Address.String() + "/config PCI_EXP_DEVCTL", Value: v})
	}
	r.Observed = fmt.Sprintf("NVIDIA driver relaxed ordering %s; NCCL_IB_PCI_RELAXED_ORDERING=%s; Device Control RlxdOrd- on %d GPU(s), %d NIC(s), unread on %d",
		driverWhy, orDefault(ncclRO, "unset (2, auto)"), len(gpuOff), len(nicOff), len(unread))
	r.Expected = "Device Control allows Relaxed Ordering wherever the driver or NCCL asks for it"
	if driverRO && len(gpuOff) > 0 {
		r.Status = Warn
		r.Findings = append(r.Findings, Finding{Subject: strings.Join(gpuOff, ", "), Status: Warn,
			Message: "the NVIDIA driver forces Relaxed Ordering but Device Control of these GPUs forbids it (the kernel or firmware cleared it): their writes go out strictly ordered"})
	}
	if ncclForcesRO(ncclRO) && len(nicOff) > 0 {
		r.Status = Warn
		r.Findings = append(r.Findings, Finding{Subject: strings.Join(nicOff, ", "), Status: Warn,
			Message: "NCCL_IB_PCI_RELAXED_ORDERING=" + ncclRO + " forces Relaxed Ordering but Device Control of these NICs forbids it: the NIC's GPUDirect RDMA writes go out strictly ordered"})
	}
	if cStrtol(ncclRO) == 0 && ncclRO != "" && f.Hypervisor() {
		r.Status = Warn
		r.Findings = append(r.Findings, Finding{Subject: "NCCL_IB_PCI_RELAXED_ORDERING", Status: Warn,
			Message: "0 turns Relaxed Ordering off for IB Verbs; NCCL's documentation says it can greatly help InfiniBand in virtual machines"})
	}
	switch {
	case r.Status == Warn:
		r.Subjects = append(append(r.Subjects, gpuOff...), nicOff...)
		r.Summary = fmt.Sprintf("%d relaxed-ordering setting(s) that Device Control or the VM contradicts: GPUDirect RDMA writes stay strictly ordered", len(r.Findings))
		r.Remediation = []string{
			"see why the kernel cleared Relaxed Ordering (dmesg | grep -i 'relaxed ordering'; a root port that mishandles it, pci_configure_relaxed_ordering in drivers/pci/probe.c) before setting it back: setpci -s <bdf> CAP_EXP+8.w=0010:0010 at run time",
			"or stop asking for it: options nvidia NVreg_EnablePCIERelaxedOrderingMode=0, NCCL_IB_PCI_RELAXED_ORDERING=0",
		}
	case f.Node.Platform.NVIDIAParams == nil && len(gpuOff) > 0:
		r.Status = Unknown
		r.Subjects = gpuOff
		r.Summary = "Device Control forbids Relaxed Ordering on " + strings.Join(gpuOff, ", ") + "; whether the NVIDIA driver asks for it is unknown (/proc/driver/nvidia/params not read)"
		r.Remediation = []string{"grep EnablePCIERelaxedOrderingMode /proc/driver/nvidia/params (with the NVIDIA driver loaded)"}
	case len(unread) > 0:
		r.Status = Unknown
		r.Subjects = unread
		r.Summary = fmt.Sprintf("Device Control of %d GPU(s)/NIC(s) on GDR paths not read: %s", len(unread), f.unreadable())
		r.Remediation = []string{f.seeConfig("Device Control")}
	default:
		r.Summary = "relaxed ordering consistent on the GPUDirect RDMA paths (" + driverWhy + ")"
	}
	return r
}

// driverRelaxedOrdering reads whether the NVIDIA driver forces Relaxed Ordering
// on its GPUs' writes, adding the evidence to r, and says what it found.
func (f *Facts) driverRelaxedOrdering(r *Result) (forced bool, why string) {
	p := f.Node.Platform.NVIDIAParams
	if p == nil {
		return false, "unknown (/proc/driver/nvidia/params not read)"
	}
	mode, ok := p.Uint("EnablePCIERelaxedOrderingMode")
	if ok {
		r.Evidence = append(r.Evidence, Evidence{Source: "/proc/driver/nvidia/params EnablePCIERelaxedOrderingMode", Value: strconv.Itoa(int(mode))})
	}
	for _, d := range p.RegistryDwords() {
		if d.Key == "RmSetPCIERelaxedOrdering" && d.Err == nil {
			r.Evidence = append(r.Evidence, Evidence{Source: "/proc/driver/nvidia/params RegistryDwords RmSetPCIERelaxedOrdering", Value: d.Raw})
			// nvrm_registry.h: 0 default/disable, 1 enable, 2 force enable.
			return d.Value != 0, "RmSetPCIERelaxedOrdering=" + d.Raw
		}
	}
	switch {
	case !ok:
		return false, "default (EnablePCIERelaxedOrderingMode not listed)"
	case mode == 1:
		return true, "forced (EnablePCIERelaxedOrderingMode=1)"
	}
	return false, "off (EnablePCIERelaxedOrderingMode=0, the default)"
}

// devCtlRO is d's Enable Relaxed Ordering bit, nil when Device Control was not read.
func devCtlRO(d *pcie.Device) *bool {
	on, known := d.RelaxedOrdering()
	if !known {
		return nil
	}
	return &on
}

// ncclForcesRO reports whether NCCL_IB_PCI_RELAXED_ORDERING v forces Relaxed
// Ordering (1); unset or 2, the default, uses it only where the NIC allows it.
func ncclForcesRO(v string) bool { return v != "" && cStrtol(v) == 1 }

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
