package pcie

// PortType is the device/port type of the PCI Express Capabilities register
// (include/uapi/linux/pci_regs.h PCI_EXP_TYPE_*).
type PortType uint8

// PCI Express device/port types.
const (
	PortEndpoint       PortType = 0x0
	PortLegacyEndpoint PortType = 0x1
	PortRootPort       PortType = 0x4
	PortUpstream       PortType = 0x5
	PortDownstream     PortType = 0x6
	PortPCIeToPCI      PortType = 0x7
	PortPCIToPCIe      PortType = 0x8
	PortRCiEP          PortType = 0x9
	PortRCEC           PortType = 0xa
)

// ACS Capability and Control bits (pci_regs.h PCI_ACS_*).
const (
	ACSSourceValidation   uint16 = 0x0001 // SV, lspci SrcValid
	ACSTranslationBlock   uint16 = 0x0002 // TB, lspci TransBlk
	ACSRequestRedirect    uint16 = 0x0004 // RR, lspci ReqRedir
	ACSCompletionRedirect uint16 = 0x0008 // CR, lspci CmpltRedir
	ACSUpstreamForwarding uint16 = 0x0010 // UF, lspci UpstreamFwd
	ACSEgressControl      uint16 = 0x0020 // EC, lspci EgressCtrl
	ACSDirectTranslated   uint16 = 0x0040 // DT, lspci DirectTrans
)

// Config is a decoded configuration space.
//
// How much is known depends on how many bytes could be read: the standard header
// (64 bytes) is always there; capabilities need 256 bytes and extended capabilities
// 4096. Fields that need more than was read are nil (pointers) and the matching
// *Known flag is false: absent and unknown are never confused.
type Config struct {
	Size int // bytes that were read

	Vendor, Device uint16
	Command        uint16
	Status         uint16
	Revision       uint8
	Class          uint32 // base<<16 | sub<<8 | prog-if
	HeaderType     uint8  // low 7 bits of 0x0e: 0 normal, 1 bridge, 2 CardBus
	MultiFunction  bool   // bit 7 of 0x0e

	// Bridge bus numbers (header type 1 and 2).
	PrimaryBus, SecondaryBus, SubordinateBus uint8

	// CapsKnown reports whether the capability list could be read: Size >= 256,
	// or a Status register without the Capabilities List bit, which means there is
	// no list (then Capabilities is empty).
	CapsKnown bool
	// ExtCapsKnown reports whether extended configuration space could be read
	// (Size >= 4096 and a PCI Express capability is present).
	ExtCapsKnown bool

	Capabilities    []Capability
	ExtCapabilities []ExtCapability

	// The decoded capabilities; for each kind, the first instance in the list.
	// They are nil or false when absent or when their Known flag is false; a
	// capability that lies partly past Size is listed but not decoded.
	Express *Express       // PCI Express capability (0x10)
	ACS     *ACS           // ACS extended capability (0x0d)
	ARI     bool           // ARI (0x0e) present
	ATS     bool           // ATS (0x0f) present
	ATSCap  *ATS           // ATS (0x0f) registers, when they lie inside the space
	PRI     bool           // PRI (0x13) present
	PASID   bool           // PASID (0x1b) present
	AER     bool           // AER (0x01) present
	DPC     bool           // DPC (0x1d) present
	SRIOV   *SRIOVCap      // SR-IOV (0x10)
	ReBAR   []ResizableBAR // Resizable BAR (0x15), one per BAR it controls
}

// Capability is one entry of the standard capability list.
type Capability struct {
	ID     uint8  // PCI_CAP_ID_*
	Offset uint16 // of the entry in configuration space
}

// ExtCapability is one entry of the extended capability list.
type ExtCapability struct {
	ID      uint16 // PCI_EXT_CAP_ID_*; 0 is the Null capability
	Version uint8
	Offset  uint16 // of the header in configuration space, 0x100 or above
}

// Express is the PCI Express capability.
type Express struct {
	Offset   uint16   // of the capability
	Version  uint8    // PCI_EXP_FLAGS_VERS
	PortType PortType // PCI_EXP_FLAGS_TYPE
	Slot     bool     // PCI_EXP_FLAGS_SLOT: slot implemented
	LinkCap  Link     // LNKCAP max speed and width
	LinkStat Link     // LNKSTA current speed and width
	PortNum  uint8    // LNKCAP port number
	// MaxPayloadSupported is DevCap's Max_Payload_Size Supported and MaxPayload
	// DevCtl's Max_Payload_Size, in bytes (128 to 4096; include/uapi/linux/pci_regs.h
	// PCI_EXP_DEVCAP_PAYLOAD, PCI_EXP_DEVCTL_PAYLOAD); 0 when unread or reserved.
	// Every function has them, RCiEPs included.
	MaxPayloadSupported int
	MaxPayload          int
	// HasLink is false for RCiEPs and RC Event Collectors, which have no link
	// registers (drivers/pci/access.c pcie_cap_has_lnkctl); the Link fields are
	// then zero.
	HasLink bool
}

// ACS is the Access Control Services extended capability.
type ACS struct {
	Offset     uint16 // of the capability header; Control is at Offset+6
	Capability uint16 // PCI_ACS_CAP
	Control    uint16 // PCI_ACS_CTRL
}

// SRIOVCap is the SR-IOV extended capability.
type SRIOVCap struct {
	Offset   uint16 // of the capability header
	TotalVFs uint16 // PCI_SRIOV_TOTAL_VF
	NumVFs   uint16 // PCI_SRIOV_NUM_VF
	Offset1  uint16 // PCI_SRIOV_VF_OFFSET: First VF Offset, in routing IDs
	Stride   uint16 // PCI_SRIOV_VF_STRIDE: VF Stride, in routing IDs
	VFDevice uint16 // PCI_SRIOV_VF_DID: the VFs' device ID
}

// ResizableBAR describes one BAR controlled by the Resizable BAR capability.
type ResizableBAR struct {
	BAR       int      // BAR index, 0-5
	Supported []uint64 // sizes in bytes the BAR can take, ascending
	Current   uint64   // size in bytes now; 0 when the encoding is out of range
}
