package pcie

// Record holds what was read for one PCI function before the tree is built: the raw
// configuration space and the parsed sysfs attributes of /sys/bus/pci/devices/<bdf>.
// Optional attributes are nil when the file is absent or says "Unknown".
type Record struct {
	Address Address
	// Path is the device's directory below /sys/devices, links resolved, for example
	// "pci0000:00/0000:00:01.0/0000:01:00.0". Its first element names the host bridge
	// and the elements between it and the last are the upstream bridges.
	Path string

	// The IDs, class and revision, as the attributes of the same names show them:
	// the kernel's copy of the standard header. sysfs takes them from Config when
	// the header was read (a VF's, which reads 0xffff, and a bridge's subsystem IDs
	// excepted).
	Vendor, Device       uint16 // vendor, device
	SubVendor, SubDevice uint16 // subsystem_vendor, subsystem_device
	Class                uint32 // class: base<<16 | sub<<8 | prog-if
	Revision             uint8  // revision

	// Config is the config file as read: 4096 (PCIe) or 256 bytes for root, 64 bytes
	// for an unprivileged reader, nil when unreadable. On a live machine only the
	// registers ParseConfig decodes are read (see ReadConfig) and the other bytes
	// are zero; a snapshot holds the whole file.
	Config []byte

	Driver       string // base name of the driver link, "" when unbound
	NUMANode     *int   // numa_node; -1 means the firmware gave none
	IOMMUGroup   *int   // iommu_group link target's number
	LocalCPUList string // local_cpulist, e.g. "0-31"

	// CurrentLink and MaxLink are the link attributes (current_link_speed and
	// _width, max_link_speed and _width). They read LNKSTA and LNKCAP again, so
	// sysfs reads them only when Config does not hold the PCI Express capability
	// (an unprivileged reader); Device.Link merges both.
	CurrentLink Link
	MaxLink     Link

	Resources []Resource // resource, one per line (BARs, ROM, bridge windows)
	// ResourcesUnread holds the line indices of the resource file that did not
	// parse; those BARs are unknown, the others are kept (as lspci keeps the lines
	// it can read). Nil when the file was absent or every line parsed.
	ResourcesUnread []int

	PhysFn  *Address  // physfn link target (this function is a VF)
	VirtFns []Address // virtfnN link targets, in N order
	SRIOV   *SRIOVCounts

	P2PMem *P2PMem // p2pmem/ group, nil when absent

	AER *AERCounts // aer_dev_* totals, nil when the kernel exposes none

	// VPD is the vpd attribute as read (see ParseVPD), nil when not read: sysfs
	// reads it only for NVIDIA networking functions, and only root may.
	VPD []byte

	// Extra records names sysfs links to this function: network interfaces (net/*),
	// RDMA devices (infiniband/*), NVMe controllers (nvme/*), DRM cards.
	NetDevs  []string
	RDMADevs []string
	NVMeDevs []string

	// Err is the first error met while reading this function; the record is still
	// kept with whatever was read.
	Err error
}

// LinkSpeed is a PCIe link generation: 1 = 2.5 GT/s, 2 = 5 GT/s, 3 = 8 GT/s,
// 4 = 16 GT/s, 5 = 32 GT/s, 6 = 64 GT/s, 7 = 128 GT/s. Zero means unknown.
type LinkSpeed uint8

// Link is a link's speed and width. Zero values mean unknown.
type Link struct {
	Speed LinkSpeed
	Width int // lanes
}

// Resource is one line of the sysfs resource file (start, end, flags).
type Resource struct {
	Index int
	Start uint64
	End   uint64
	Flags uint64
}

// SRIOVCounts are the sriov_totalvfs and sriov_numvfs attributes of a PF.
type SRIOVCounts struct {
	TotalVFs int `json:"total_vfs"`
	NumVFs   int `json:"num_vfs"`
}

// AERCounts are the error totals AER has logged for the function since boot: the
// TOTAL_ERR_COR, TOTAL_ERR_NONFATAL and TOTAL_ERR_FATAL lines of aer_dev_correctable,
// aer_dev_nonfatal and aer_dev_fatal (drivers/pci/pcie/aer.c aer_stats_dev_attr).
type AERCounts struct {
	Correctable uint64
	NonFatal    uint64
	Fatal       uint64
}

// P2PMem is the p2pmem/ attribute group of a P2PDMA provider
// (Documentation/ABI/testing/sysfs-bus-pci).
type P2PMem struct {
	Size      uint64 `json:"size"`      // p2pmem/size
	Available uint64 `json:"available"` // p2pmem/available
	Published bool   `json:"published"` // p2pmem/published
	Allocate  bool   `json:"allocate"`  // p2pmem/allocate exists (Linux 6.2+)
}
