package check

import (
	"fmt"
	"strings"

	"github.com/p2pkit/p2pkit/internal/bytesize"
	"github.com/p2pkit/p2pkit/node"
)

// kernelP2PDMAUsers reports whether some pair of interest has an endpoint that
// moves data through the kernel's P2PDMA: an NVMe controller, an RDMA NIC or a
// p2pmem provider.
func (f *Facts) kernelP2PDMAUsers() bool {
	for i, r := range f.roles {
		if r&(roleNVMe|roleRDMA|roleP2PMem) != 0 && f.partners(i, r.pairsWith) > 0 {
			return true
		}
	}
	return false
}

// checkKernelP2PDMA reports whether the kernel was built with CONFIG_PCI_P2PDMA,
// which kernel peer-to-peer users need (NVMe controller memory buffers, p2pmem,
// RDMA and NVMe-oF target offload through struct pages; drivers/pci/p2pdma.c),
// and lists the p2pmem providers (/sys/bus/pci/devices/*/p2pmem). NVIDIA GPU
// P2P and GPUDirect RDMA do not depend on it, so its absence blocks nvme-p2p only,
// and only where a kernel user of it is present. Not every distribution kernel
// has it: Debian's 6.1 and 6.12 kernels are built without it.
func checkKernelP2PDMA(f *Facts) Result {
	r := Result{Refs: []string{docRef("kernel_p2pdma"), "linux drivers/pci/p2pdma.c", "linux Documentation/driver-api/pci/p2pdma.rst", "linux Documentation/ABI/testing/sysfs-bus-pci (p2pmem)"}}
	kc := f.Node.Platform.KernelConfig
	var providers []string
	for _, d := range f.Node.Topology.Devices {
		if m := d.P2PMem; m != nil {
			providers = append(providers, d.Address.String())
			r.Findings = append(r.Findings, Finding{Subject: d.Address.String(), Status: Pass,
				Message: fmt.Sprintf("p2pmem provider: %s, %s available, published %t", bytesize.Format(m.Size), bytesize.Format(m.Available), m.Published)})
		}
	}
	r.Observed = fmt.Sprintf("CONFIG_PCI_P2PDMA=%s, %d p2pmem provider(s)", kc.Value("CONFIG_PCI_P2PDMA"), len(providers))
	if kc.Source != "" {
		r.Evidence = append(r.Evidence, Evidence{Source: kc.Source, Value: "CONFIG_PCI_P2PDMA=" + kc.Value("CONFIG_PCI_P2PDMA").String()})
	}
	users := f.kernelP2PDMAUsers()
	switch v := kc.Value("CONFIG_PCI_P2PDMA"); {
	case v == node.ConfigYes:
		r.Status = Pass
		r.Summary = "kernel built with CONFIG_PCI_P2PDMA"
		if len(providers) > 0 {
			r.Summary += fmt.Sprintf("; %d p2pmem provider(s): %s", len(providers), strings.Join(providers, ", "))
		}
	case len(providers) > 0:
		r.Status = Pass
		r.Summary = fmt.Sprintf("%d p2pmem provider(s) prove P2PDMA is built in", len(providers))
	case !users:
		r.Status = Skip
		r.Summary = "no NVMe controller, RDMA NIC or p2pmem provider here would use the kernel's P2PDMA"
	case v == node.ConfigNo:
		r.Status = Fail
		r.Blocks = []Capability{CapNVMeP2P}
		r.Summary = "kernel built without CONFIG_PCI_P2PDMA: kernel P2PDMA users (NVMe CMB, p2pmem, RDMA P2P) cannot work"
		r.Expected = "CONFIG_PCI_P2PDMA=y"
		r.Remediation = []string{"boot a kernel built with CONFIG_PCI_P2PDMA=y; not every distribution kernel has it (Debian's 6.1 and 6.12 do not): check with grep CONFIG_PCI_P2PDMA /boot/config-$(uname -r)"}
	default:
		r.Status = Unknown
		r.Blocks = []Capability{CapNVMeP2P}
		r.Summary = "kernel configuration not found (/proc/config.gz, /boot/config-<release>) and no p2pmem provider: whether the kernel has P2PDMA is unknown"
	}
	return r
}
