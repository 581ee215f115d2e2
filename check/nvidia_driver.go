package check

import "fmt"

// checkNVIDIADriver reports the NVIDIA kernel driver's version and flavour from
// /proc/driver/nvidia/version (kernel-open/nvidia/nv-procfs.c in
// open-gpu-kernel-modules) and what the flavour implies: the open modules
// (Turing and newer GPUs) export DMA-BUF, the GPUDirect RDMA path NVIDIA
// recommends, on Linux 5.12+; the proprietary ones need nvidia-peermem, and a
// gdrdrv built for the open flavour cannot load with them (NVIDIA/gdrcopy
// README). NVIDIA GPUs without the driver fail p2p, gdr and gdrcopy, not
// nvme-p2p: the kernel's P2PDMA does not use the NVIDIA driver.
func checkNVIDIADriver(f *Facts) Result {
	r := Result{Refs: []string{docRef("nvidia_driver"), urlOpenModules, urlGPUDirectRDMA, urlGDRCopy}}
	gpus := f.NVIDIAGPUs()
	drv := f.Node.Platform.NVIDIA
	if len(gpus) == 0 && drv == nil {
		r.Status, r.Summary = Skip, "no NVIDIA GPU"
		return r
	}
	if drv == nil {
		// GPU P2P, GPUDirect RDMA and GDRCopy run through the NVIDIA driver; the
		// kernel's P2PDMA (NVMe, p2pmem) does not use it.
		r.Status, r.Blocks = Fail, []Capability{CapP2P, CapGDR, CapGDRCopy}
		r.Summary = "NVIDIA GPUs present but the NVIDIA driver is not loaded"
		r.Evidence = []Evidence{{Source: "/proc/driver/nvidia/version", Value: "absent"}}
		r.Remediation = []string{"install and load the NVIDIA driver (modprobe nvidia); prefer the open kernel modules (nvidia-open) on Turing and newer GPUs"}
		for _, g := range gpus {
			r.Subjects = append(r.Subjects, g.Address.String())
		}
		return r
	}
	flavour := "proprietary"
	if drv.Open {
		flavour = "open"
	}
	r.Observed = drv.Version + " " + flavour
	r.Evidence = []Evidence{{Source: "/proc/driver/nvidia/version", Value: drv.Line}}
	r.Status = Pass
	var unbound []string
	for _, g := range gpus {
		if g.Driver != "nvidia" {
			unbound = append(unbound, g.Address.String())
			drvName := g.Driver
			if drvName == "" {
				drvName = "no driver"
			}
			r.Findings = append(r.Findings, Finding{Subject: g.Address.String(), Status: Warn, Message: "GPU bound to " + drvName + ", not nvidia"})
		}
	}
	implies := "GPUDirect RDMA needs nvidia-peermem (these modules export no DMA-BUF); a gdrdrv for them must be built for the proprietary flavour"
	if drv.Open {
		implies = "GPUDirect RDMA can use DMA-BUF on Linux 5.12+; gdrdrv of either build flavour loads"
	}
	r.Summary = fmt.Sprintf("NVIDIA driver %s (%s kernel modules): %s", drv.Version, flavour, implies)
	if len(unbound) > 0 {
		r.Status = Warn
		r.Subjects = unbound
		r.Summary = fmt.Sprintf("%d NVIDIA GPU(s) not bound to the nvidia driver (VFIO passthrough or another driver)", len(unbound))
		r.Remediation = []string{"bind the GPUs to nvidia (echo <bdf> > /sys/bus/pci/drivers/nvidia/bind) unless they are meant for passthrough"}
	}
	return r
}
