package pcie

import "encoding/binary"

// ATS is the Address Translation Services extended capability (0x0f).
type ATS struct {
	Offset uint16 // of the capability header
	// Capability and Control are PCI_ATS_CAP (+4) and PCI_ATS_CTRL (+6).
	Capability, Control uint16
}

// ATS Control fields (include/uapi/linux/pci_regs.h PCI_ATS_CTRL_*).
const (
	ATSControlEnable uint16 = 0x8000 // PCI_ATS_CTRL_ENABLE, lspci "Enable+"
	atsControlSTU    uint16 = 0x001f // PCI_ATS_CTRL_STU
	atsCapQueueDepth uint16 = 0x001f // PCI_ATS_CAP_QDEP
)

// Enabled reports whether the ATS Enable bit is set: the host's IOMMU driver has
// turned translation requests on for the function (pci_enable_ats() in
// drivers/pci/ats.c), what lspci shows as "ATSCtl: Enable+".
func (a *ATS) Enabled() bool { return a.Control&ATSControlEnable != 0 }

// STU is the Smallest Translation Unit field of ATS Control, as lspci prints it.
func (a *ATS) STU() int { return int(a.Control & atsControlSTU) }

// QueueDepth is the Invalidate Queue Depth of the ATS Capability register, as lspci
// prints it (0 means 32).
func (a *ATS) QueueDepth() int { return int(a.Capability & atsCapQueueDepth) }

// parseATS decodes the ATS capability at pos when its registers lie inside the
// space (pciutils ls-ecaps.c cap_ats reads the same two words).
func parseATS(s *space, pos int) *ATS {
	if !s.has(pos, 8) {
		return nil
	}
	le := binary.LittleEndian
	return &ATS{Offset: uint16(pos), Capability: le.Uint16(s.b[pos+4:]), Control: le.Uint16(s.b[pos+6:])}
}

// ATSState returns the function's ATS capability. known is false when extended
// configuration space could not be read; when known is true, a nil ats means the
// function has none (on NVIDIA ConnectX NICs the firmware exposes it only with
// mlxconfig ATS_ENABLED=true).
func (d *Device) ATSState() (ats *ATS, known bool) {
	if d.Config == nil {
		return nil, false
	}
	if d.Config.ATSCap != nil {
		return d.Config.ATSCap, true
	}
	if d.Config.CapsKnown && d.Config.Express == nil {
		return nil, true
	}
	return nil, d.Config.ExtCapsKnown
}
