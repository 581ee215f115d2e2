package check

import (
	"fmt"

	"github.com/p2pkit/p2pkit/iommugroup"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/provision"
)

// Sources of virt_host.
const (
	refNVAIEAppendix = "https://docs.nvidia.com/ai-enterprise/planning-resource/optimizing-vm-configuration-ai-inference/latest/appendix.html (ATS and ACS configuration)"
	refRDMATopo      = "rdma-core kernel-boot/rdma_topo (NVCX_Inline_Complex check, virtualization)"
	refDeviceGroup   = "linux drivers/iommu/iommu.c pci_device_group()"
)

// checkVirtHost judges GPUDirect between the GPUs and RDMA NICs of a host that
// passes them to VMs, as NVIDIA's VM guide and rdma_topo's check judge it: the NIC
// has the ATS capability (ConnectX firmware shows it only with mlxconfig
// ATS_ENABLED=true) and ATS is enabled (lspci "ATSCtl: Enable+": the host's IOMMU
// driver turned it on); the NIC and the GPU are in IOMMU groups of their own (a VM
// is given whole groups, pci_device_group()); the ports on their path keep SV, RR,
// CR and UF as their capability offers them; and where the path turns at a switch,
// the NIC's port has Direct Translated P2P, which sends the NIC's translated requests
// to the GPU directly while untranslated ones still reach the IOMMU. A failure
// blocks gdr. On bare metal, or in a VM, it does not apply.
func checkVirtHost(f *Facts) Result {
	r := Result{Refs: []string{docRef("virt_host"), refNVAIEAppendix, refRDMATopo, refDeviceGroup}}
	use, why, err := f.use()
	switch {
	case f.Hypervisor():
		r.Status, r.Summary = Skip, "virtual machine: the host's ACS and ATS are judged on the host"
		return r
	case err != nil:
		r.Status, r.Summary = Unknown, err.Error()
		r.addBlocks(CapGDR)
		r.Remediation = []string{"say what the host is for: p2pcheck --virt-host or --bare-metal"}
		return r
	case use != provision.ModeVirtHost:
		r.Status, r.Summary = Skip, "bare metal ("+why+"): virt_host judges hosts that pass devices to VMs (--virt-host)"
		return r
	}
	var lines pairLines
	worst, n := Pass, 0
	for p := range f.pairs() {
		gpu, nic, ok := gpuAndNIC(p)
		if !ok {
			continue
		}
		n++
		st, msg := f.virtPair(gpu, nic)
		worst = worse(worst, st)
		lines.finding(p, st, msg)
	}
	if n == 0 {
		r.Status, r.Summary = Skip, "virtualization host ("+why+"), but no GPU and RDMA NIC pair to judge"
		return r
	}
	r.Status = worst
	lines.listFindings(&r)
	if worst != Pass {
		r.addBlocks(CapGDR)
		r.Remediation = []string{
			"ACS for the translated path, isolation kept: p2pcheck fix --virt-host --apply, and --persist where the kernel can keep it",
			atsSteps,
		}
	}
	r.Summary = fmt.Sprintf("virtualization host (%s): %d GPU-NIC pair(s), translated P2P %s", why, n, map[Status]string{
		Pass: "ready on every one", Warn: "ready, with warnings", Fail: "not ready on some", Unknown: "unknown on some"}[worst])
	return r
}

// isDownstreamOrRoot reports a root port or a switch downstream port.
func isDownstreamOrRoot(d *pcie.Device) bool {
	pt, ok := d.PortType()
	return ok && (pt == pcie.PortRootPort || pt == pcie.PortDownstream)
}

// gpuAndNIC returns the GPU and the RDMA NIC of a GPU-NIC pair.
func gpuAndNIC(p pair) (gpu, nic *pcie.Device, ok bool) {
	switch {
	case p.ra&roleGPU != 0 && p.rb&roleRDMA != 0:
		return p.a, p.b, true
	case p.rb&roleGPU != 0 && p.ra&roleRDMA != 0:
		return p.b, p.a, true
	}
	return nil, nil, false
}

// virtPair judges one GPU-NIC pair; the message says every part.
func (f *Facts) virtPair(gpu, nic *pcie.Device) (Status, string) {
	st := Pass
	var parts []string
	add := func(s Status, msg string) {
		st = worse(st, s)
		parts = append(parts, msg)
	}
	add(atsState(nic))
	add(groupState(gpu, nic))
	add(f.pathState(gpu, nic))
	msg := ""
	for i, p := range parts {
		if i > 0 {
			msg += "; "
		}
		msg += p
	}
	return st, msg
}

// atsSteps are the steps that turn ATS on in a ConnectX NIC's firmware, on the
// host (NVIDIA AI Enterprise, "ATS and ACS configuration").
const atsSteps = "ATS on a ConnectX NIC, on the host: mlxconfig -d <dev> q | grep ATS_ENABLED; " +
	"mlxconfig -d <dev> set ATS_ENABLED=true; then reboot the host (NVIDIA AI Enterprise, ATS and ACS configuration)"

// atsState judges the NIC's ATS capability and Enable bit.
func atsState(nic *pcie.Device) (Status, string) {
	ats, known := nic.ATSState()
	switch {
	case !known:
		return Unknown, "ATS of " + nic.Address.String() + " not read (config space past 64 bytes needs root)"
	case ats == nil:
		return Fail, "NIC " + nic.Address.String() + " has no ATS capability (mlxconfig ATS_ENABLED=false)"
	case !ats.Enabled():
		return Warn, "NIC " + nic.Address.String() + " has ATS but it is not enabled (ATSCtl: Enable-): the host's IOMMU driver turns it on when it attaches the NIC to a translating domain, such as a VM's"
	}
	return Pass, "ATS enabled on " + nic.Address.String()
}

// groupState judges the IOMMU groups: a VM takes whole groups, so the NIC and the
// GPU must each have their own to go to VMs apart.
func groupState(gpu, nic *pcie.Device) (Status, string) {
	switch {
	case gpu.IOMMUGroup == nil || nic.IOMMUGroup == nil:
		return Unknown, "IOMMU groups not known (no IOMMU groups in sysfs)"
	case *gpu.IOMMUGroup == *nic.IOMMUGroup:
		return Fail, fmt.Sprintf("NIC and GPU share IOMMU group %d: a VM takes whole groups, so they are not isolated from each other", *nic.IOMMUGroup)
	}
	return Pass, fmt.Sprintf("IOMMU groups %d (NIC) and %d (GPU)", *nic.IOMMUGroup, *gpu.IOMMUGroup)
}

// pathState judges isolation on the path and Direct Translated P2P on the NIC's
// port where the path turns at a switch.
func (f *Facts) pathState(gpu, nic *pcie.Device) (Status, string) {
	p := f.Node.Topology.Path(nic, gpu)
	for _, h := range p.Hops {
		acs, known := h.Device.ACS()
		switch {
		case !known && h.Device.IsBridge():
			return Unknown, "ACS of " + h.Device.Address.String() + " not read"
		case acs == nil && p.Common != nil && h.Device != p.Common && isDownstreamOrRoot(h.Device):
			return Fail, h.Device.Address.String() + " has no ACS capability: the NIC and the GPU reach each other " +
				"directly, without the IOMMU, whatever their IOMMU groups say"
		case acs == nil:
			continue
		}
		need := acs.Capability & iommugroup.ReqACSFlags
		if acs.Control&need != need {
			return Fail, fmt.Sprintf("%s lacks isolation (ACSCtl %s): devices below it reach each other without the IOMMU",
				h.Device.Address, pcie.ACSString(acs.Control))
		}
	}
	if p.Common == nil {
		return Pass, "the path crosses the root complex: peer-to-peer routing there is the root complex's"
	}
	var port *pcie.Device
	for x := nic; x != nil && x != p.Common; x = x.Upstream() {
		port = x
	}
	acs, _ := port.ACS()
	switch {
	case port == nic || acs == nil:
		return Warn, "no port with ACS below the common bridge " + p.Common.Address.String() + " on the NIC's side: nothing routes translated requests directly"
	case acs.Capability&pcie.ACSDirectTranslated == 0:
		return Warn, port.Address.String() + " has no ACS Direct Translated P2P: the NIC's translated requests go through the root complex"
	case acs.Control&pcie.ACSDirectTranslated == 0:
		return Fail, fmt.Sprintf("%s has Direct Translated P2P off (ACSCtl %s): the NIC's translated requests go through the root complex; fix: %s",
			port.Address, pcie.ACSString(acs.Control), provision.Setpci(port.Address, pcie.ACSDirectTranslated, pcie.ACSDirectTranslated))
	}
	return Pass, "Direct Translated P2P on " + port.Address.String() + ", isolation kept on the path"
}
