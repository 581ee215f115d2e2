package check

// Public sources the checks cite.
const (
	urlKernelParams  = "https://docs.kernel.org/admin-guide/kernel-parameters.html"
	urlIOMMUGroupABI = "https://docs.kernel.org/admin-guide/abi-testing.html#abi-sys-kernel-iommu-groups-grp-id-type"
	urlGPUDirectRDMA = "https://docs.nvidia.com/cuda/gpudirect-rdma/"
	urlNCCLTrouble   = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"
	urlNCCLEnv       = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
	urlGDRCopy       = "https://github.com/NVIDIA/gdrcopy"
	urlOpenModules   = "https://github.com/NVIDIA/open-gpu-kernel-modules"
)

// References shared by several checks.
const (
	refP2PDMA    = "linux drivers/pci/p2pdma.c calc_map_type_and_dist()"
	refACSRedi   = "linux drivers/pci/pci.c pci_disable_acs_redir()"
	refConfigACS = "linux drivers/pci/pci.c __pci_config_acs() (commits 47c8846a49ba, 9cf8a952d57b; docs/fix.md)"
	refNCCLVM    = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html (PCI Access Control Services; virtual machines)"
	refSysfs     = "linux Documentation/ABI/testing/sysfs-bus-pci"
)

// docRef is the reference to a check's page under docs/checks.
func docRef(id string) string { return "docs/checks/" + id + ".md" }
