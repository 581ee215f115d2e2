package pcie

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Configuration space sizes (include/uapi/linux/pci_regs.h).
const (
	// ConfigHeaderSize is PCI_STD_HEADER_SIZEOF, the bytes an unprivileged reader of
	// the sysfs config file gets (drivers/pci/pci-sysfs.c pci_read_config).
	ConfigHeaderSize = 64
	// ConfigSize is PCI_CFG_SPACE_SIZE, conventional configuration space.
	ConfigSize = 256
	// ConfigExpSize is PCI_CFG_SPACE_EXP_SIZE, PCI Express extended configuration space.
	ConfigExpSize = 4096
)

// Capability IDs of the standard list that ParseConfig decodes (pci_regs.h PCI_CAP_ID_*).
const (
	CapIDExpress uint8 = 0x10 // PCI_CAP_ID_EXP
)

// Extended capability IDs that ParseConfig decodes (pci_regs.h PCI_EXT_CAP_ID_*).
const (
	ExtCapIDAER   uint16 = 0x01 // PCI_EXT_CAP_ID_ERR, Advanced Error Reporting
	ExtCapIDACS   uint16 = 0x0d // PCI_EXT_CAP_ID_ACS, Access Control Services
	ExtCapIDARI   uint16 = 0x0e // PCI_EXT_CAP_ID_ARI, Alternative Routing-ID
	ExtCapIDATS   uint16 = 0x0f // PCI_EXT_CAP_ID_ATS, Address Translation Services
	ExtCapIDSRIOV uint16 = 0x10 // PCI_EXT_CAP_ID_SRIOV, Single Root I/O Virtualization
	ExtCapIDPRI   uint16 = 0x13 // PCI_EXT_CAP_ID_PRI, Page Request Interface
	ExtCapIDReBAR uint16 = 0x15 // PCI_EXT_CAP_ID_REBAR, Resizable BAR
	ExtCapIDPASID uint16 = 0x1b // PCI_EXT_CAP_ID_PASID, Process Address Space ID
	ExtCapIDDPC   uint16 = 0x1d // PCI_EXT_CAP_ID_DPC, Downstream Port Containment
)

// ErrInvalidConfig is returned (wrapped) by ParseConfig for bytes that are not a
// usable configuration space: shorter than the standard header, or all ones.
var ErrInvalidConfig = errors.New("pcie: invalid config space")

// Standard header offsets and bits (pci_regs.h).
const (
	offVendor       = 0x00 // PCI_VENDOR_ID
	offDevice       = 0x02 // PCI_DEVICE_ID
	offCommand      = 0x04 // PCI_COMMAND
	offStatus       = 0x06 // PCI_STATUS
	offRevision     = 0x08 // PCI_CLASS_REVISION
	offClass        = 0x09 // prog-if, subclass, base class
	offHeaderType   = 0x0e // PCI_HEADER_TYPE
	offPrimaryBus   = 0x18 // PCI_PRIMARY_BUS (CardBus: PCI_CB_PRIMARY_BUS)
	offSecondaryBus = 0x19 // PCI_SECONDARY_BUS (CardBus: PCI_CB_CARD_BUS)
	offSubordinate  = 0x1a // PCI_SUBORDINATE_BUS (CardBus: PCI_CB_SUBORDINATE_BUS)
	offCapList      = 0x34 // PCI_CAPABILITY_LIST
	offCBCapList    = 0x14 // PCI_CB_CAPABILITY_LIST

	statusCapList = 0x10 // PCI_STATUS_CAP_LIST

	// Header types, the low 7 bits of PCI_HEADER_TYPE (PCI_HEADER_TYPE_*).
	headerNormal  = 0
	headerBridge  = 1
	headerCardBus = 2
)

// Walk bounds of drivers/pci/pci.c: PCI_FIND_CAP_TTL for the standard list and
// (PCI_CFG_SPACE_EXP_SIZE - PCI_CFG_SPACE_SIZE) / 8 for the extended list.
const (
	capTTL    = 48
	extCapTTL = (ConfigExpSize - ConfigSize) / 8
)

// ParseConfig decodes a configuration space as read from the sysfs config file.
//
// All registers are little-endian on every host (PCI Local Bus spec), so b is decoded
// with binary.LittleEndian whatever the CPU. b must hold at least the 64-byte standard
// header. What else is decoded depends on len(b), as described on [Config]: the
// capability list needs 256 bytes (or a header whose Status has no Capabilities List
// bit, which is then known to be empty), the extended list 4096 bytes and a PCI
// Express capability. Capabilities that lie partly outside b are listed but left
// undecoded. Both walks are bounded like the kernel's (48 and 480 steps) and keep a
// visited set like pciutils' lib/caps.c, so looping lists end.
//
// A header that reads all ones (the function is absent, or in error) is rejected.
// A vendor ID of 0xffff alone is not: an SR-IOV virtual function reads 0xffff in its
// vendor and device ID registers (PCIe Base spec, SR-IOV "VF Vendor ID"), and the
// kernel takes the IDs from the PF's SR-IOV capability instead (drivers/pci/iov.c
// pci_iov_add_virtfn). NewTopology fills them from the sysfs attributes.
func ParseConfig(b []byte) (*Config, error) {
	return parseSpace(&space{b: b})
}

func parseSpace(s *space) (*Config, error) {
	if !s.has(0, ConfigHeaderSize) {
		if s.err != nil {
			return nil, s.err
		}
		return nil, fmt.Errorf("%w: %d bytes, want at least %d", ErrInvalidConfig, len(s.b), ConfigHeaderSize)
	}
	b := s.b
	le := binary.LittleEndian
	c := &Config{
		Size:     len(b),
		Vendor:   le.Uint16(b[offVendor:]),
		Device:   le.Uint16(b[offDevice:]),
		Command:  le.Uint16(b[offCommand:]),
		Status:   le.Uint16(b[offStatus:]),
		Revision: b[offRevision],
		Class:    uint32(b[offClass+2])<<16 | uint32(b[offClass+1])<<8 | uint32(b[offClass]),
	}
	if c.Vendor == 0xffff && c.Device == 0xffff && c.Class == 0xffffff {
		return nil, fmt.Errorf("%w: header reads all ones (function absent or in error)", ErrInvalidConfig)
	}
	c.HeaderType = b[offHeaderType] & 0x7f
	c.MultiFunction = b[offHeaderType]&0x80 != 0

	capPtr := offCapList
	switch c.HeaderType {
	case headerBridge:
		c.PrimaryBus, c.SecondaryBus, c.SubordinateBus = b[offPrimaryBus], b[offSecondaryBus], b[offSubordinate]
	case headerCardBus:
		c.PrimaryBus, c.SecondaryBus, c.SubordinateBus = b[offPrimaryBus], b[offSecondaryBus], b[offSubordinate]
		capPtr = offCBCapList
	}

	if c.Status&statusCapList == 0 {
		// pci_find_capability() (drivers/pci/pci.c __pci_bus_find_cap_start) gives up
		// here too: without the bit there is no list to walk, whatever 0x34 holds.
		c.CapsKnown = true
		return c, nil
	}
	if len(b) < ConfigSize {
		return c, nil
	}
	c.CapsKnown = true
	c.walkCaps(s, int(b[capPtr]))

	// Extended capabilities exist only behind a PCI Express capability (pciutils
	// lib/caps.c pci_scan_caps, and the kernel's pci_cfg_space_size).
	if len(b) >= ConfigExpSize && c.Express != nil {
		c.ExtCapsKnown = true
		c.walkExtCaps(s)
	}
	if s.err != nil {
		return nil, s.err
	}
	return c, nil
}

// walkCaps follows the standard capability list from pos, as the kernel's
// __pci_find_next_cap_ttl (drivers/pci/pci.c) does: at most 48 steps, pointers
// masked with ^3, stop on a pointer below 0x40 or on ID 0xff. A visited set stops
// cycles early and every read is bounds-checked against len(b).
func (c *Config) walkCaps(s *space, pos int) {
	var seen [ConfigSize / 4]bool
	for ttl := capTTL; ttl > 0; ttl-- {
		if pos < ConfigHeaderSize {
			return
		}
		pos &^= 3
		if !s.has(pos, 2) || seen[pos/4] {
			return
		}
		seen[pos/4] = true
		id := s.b[pos]
		if id == 0xff {
			return
		}
		c.Capabilities = append(c.Capabilities, Capability{ID: id, Offset: uint16(pos)})
		if id == CapIDExpress && c.Express == nil {
			c.Express = parseExpress(s, pos)
		}
		pos = int(s.b[pos+1])
	}
}

// PCI Express capability register offsets and fields (pci_regs.h PCI_EXP_*).
const (
	expFlags       = 0x02   // PCI_EXP_FLAGS
	expFlagsVers   = 0x000f // PCI_EXP_FLAGS_VERS
	expFlagsType   = 0x00f0 // PCI_EXP_FLAGS_TYPE
	expFlagsSlot   = 0x0100 // PCI_EXP_FLAGS_SLOT
	expDevCap      = 0x04   // PCI_EXP_DEVCAP
	expDevCapMPS   = 0x0007 // PCI_EXP_DEVCAP_PAYLOAD: Max_Payload_Size Supported
	expDevCtl      = 0x08   // PCI_EXP_DEVCTL
	expDevCtlMPS   = 0x00e0 // PCI_EXP_DEVCTL_PAYLOAD: Max_Payload_Size
	expDevRegsEnd  = expDevCtl + 2
	expLnkCap      = 0x0c   // PCI_EXP_LNKCAP
	expLnkSta      = 0x12   // PCI_EXP_LNKSTA
	expLinkSpeed   = 0x000f // PCI_EXP_LNKCAP_SLS, PCI_EXP_LNKSTA_CLS
	expLinkWidth   = 0x03f0 // PCI_EXP_LNKCAP_MLW, PCI_EXP_LNKSTA_NLW
	expLnkCapPort  = 24     // PCI_EXP_LNKCAP_PN is bits 31:24
	expLinkRegsEnd = expLnkSta + 2

	expDevCtlRelaxEn = 0x0010 // PCI_EXP_DEVCTL_RELAX_EN
)

// parseExpress decodes the PCI Express capability at pos. The link registers are read
// only for the port types the kernel's pcie_cap_has_lnkctl() (drivers/pci/access.c)
// lists, which leaves out RCiEPs and RC Event Collectors, and only when they lie
// inside b.
func parseExpress(s *space, pos int) *Express {
	le := binary.LittleEndian
	e := &Express{Offset: uint16(pos)}
	if !s.has(pos, expFlags+2) {
		return e
	}
	flags := le.Uint16(s.b[pos+expFlags:])
	e.Version = uint8(flags & expFlagsVers)
	e.PortType = PortType((flags & expFlagsType) >> 4)
	e.Slot = flags&expFlagsSlot != 0
	if s.has(pos, expDevRegsEnd) {
		// Device registers exist on every function, RCiEPs included: decoded
		// before the return for functions without link registers below.
		e.MaxPayloadSupported = payloadSize(uint16(le.Uint32(s.b[pos+expDevCap:]) & expDevCapMPS))
		e.MaxPayload = payloadSize(le.Uint16(s.b[pos+expDevCtl:]) & expDevCtlMPS >> 5)
	}
	switch e.PortType {
	case PortEndpoint, PortLegacyEndpoint, PortRootPort, PortUpstream, PortDownstream,
		PortPCIeToPCI, PortPCIToPCIe:
		e.HasLink = true
	}
	if !e.HasLink || !s.has(pos, expLinkRegsEnd) {
		return e
	}
	lnkcap := le.Uint32(s.b[pos+expLnkCap:])
	lnksta := le.Uint16(s.b[pos+expLnkSta:])
	e.LinkCap = Link{Speed: linkSpeed(uint16(lnkcap)), Width: int(lnkcap&expLinkWidth) >> 4}
	e.LinkStat = Link{Speed: linkSpeed(lnksta), Width: int(lnksta&expLinkWidth) >> 4}
	e.PortNum = uint8(lnkcap >> expLnkCapPort)
	return e
}

// payloadSize maps the 3-bit Max_Payload_Size encoding of DevCap and DevCtl to
// bytes, 128 << v (include/uapi/linux/pci_regs.h PCI_EXP_DEVCAP_PAYLOAD,
// PCI_EXP_DEVCTL_PAYLOAD; drivers/pci/pci.c pcie_get_mps); the reserved
// encodings 6 and 7 are unknown (0).
func payloadSize(v uint16) int {
	if v > maxPayloadCode {
		return 0
	}
	return 128 << v
}

// maxPayloadCode is the largest defined Max_Payload_Size encoding, 4096 bytes
// (PCI_EXP_DEVCTL_PAYLOAD_4096B).
const maxPayloadCode = 5

// linkSpeed maps the 4-bit Link Speed encoding of LNKCAP and LNKSTA to a
// LinkSpeed. The encoding is an index into the Supported Link Speeds vector of
// LNKCAP2, whose bit n stands for generation n on every device the spec allows, so
// the index is the generation; values past Gen7 are unknown.
func linkSpeed(reg uint16) LinkSpeed {
	s := LinkSpeed(reg & expLinkSpeed)
	if s > maxLinkSpeed {
		return 0
	}
	return s
}

// walkExtCaps follows the extended capability list from 0x100 as the kernel's
// pci_find_next_ext_capability (drivers/pci/pci.c) does: at most 480 steps, stop on
// a next pointer below 0x100. Like pciutils' lib/caps.c it also stops on a header
// of 0 (no capabilities) or 0xffffffff (absent or in error) anywhere in the list and
// on an offset it has seen before. Entries with ID 0 (the "Null" capability
// hypervisors use to hide one) are listed and followed.
func (c *Config) walkExtCaps(s *space) {
	le := binary.LittleEndian
	var seen [ConfigExpSize / 4]bool
	pos := ConfigSize
	for ttl := extCapTTL; ttl > 0; ttl-- {
		if !s.has(pos, 4) || seen[pos/4] {
			return
		}
		seen[pos/4] = true
		hdr := le.Uint32(s.b[pos:])
		if hdr == 0 || hdr == 0xffffffff {
			return
		}
		id, ver, next := uint16(hdr), uint8(hdr>>16&0xf), int(hdr>>20&0xffc)
		c.ExtCapabilities = append(c.ExtCapabilities, ExtCapability{ID: id, Version: ver, Offset: uint16(pos)})
		c.decodeExt(s, id, pos)
		if next < ConfigSize {
			return
		}
		pos = next
	}
}

// decodeExt decodes the extended capabilities Config has fields for. The first
// instance of each wins, as pci_find_ext_capability() returns the first.
func (c *Config) decodeExt(s *space, id uint16, pos int) {
	le := binary.LittleEndian
	b := s.b
	switch id {
	case ExtCapIDAER:
		c.AER = true
	case ExtCapIDARI:
		c.ARI = true
	case ExtCapIDATS:
		c.ATS = true
		if c.ATSCap == nil {
			c.ATSCap = parseATS(s, pos)
		}
	case ExtCapIDPRI:
		c.PRI = true
	case ExtCapIDPASID:
		c.PASID = true
	case ExtCapIDDPC:
		c.DPC = true
	case ExtCapIDACS:
		// PCI_ACS_CAP at +4, PCI_ACS_CTRL at +6; the kernel's
		// pci_bridge_has_acs_redir (drivers/pci/p2pdma.c) reads the latter.
		if c.ACS == nil && s.has(pos, 8) {
			c.ACS = &ACS{
				Offset:     uint16(pos),
				Capability: le.Uint16(b[pos+4:]),
				Control:    le.Uint16(b[pos+6:]),
			}
		}
	case ExtCapIDSRIOV:
		// pci_regs.h PCI_SRIOV_TOTAL_VF 0x0e, PCI_SRIOV_NUM_VF 0x10,
		// PCI_SRIOV_VF_OFFSET 0x14, PCI_SRIOV_VF_STRIDE 0x16, PCI_SRIOV_VF_DID 0x1a.
		if c.SRIOV == nil && s.has(pos, 0x1c) {
			c.SRIOV = &SRIOVCap{
				Offset:   uint16(pos),
				TotalVFs: le.Uint16(b[pos+0x0e:]),
				NumVFs:   le.Uint16(b[pos+0x10:]),
				Offset1:  le.Uint16(b[pos+0x14:]),
				Stride:   le.Uint16(b[pos+0x16:]),
				VFDevice: le.Uint16(b[pos+0x1a:]),
			}
		}
	case ExtCapIDReBAR:
		if c.ReBAR == nil {
			c.ReBAR = parseReBAR(s, pos)
		}
	}
}

// Resizable BAR layout (pci_regs.h PCI_REBAR_*): after the header, one
// (capability, control) dword pair per resizable BAR; the first control register
// holds the number of pairs.
const (
	rebarCap         = 0x04       // PCI_REBAR_CAP
	rebarCtrl        = 0x08       // PCI_REBAR_CTRL
	rebarEntrySize   = 8          // one PCI_REBAR_CAP + PCI_REBAR_CTRL pair
	rebarCtrlBARIdx  = 0x00000007 // PCI_REBAR_CTRL_BAR_IDX
	rebarCtrlNBAR    = 0x000000e0 // PCI_REBAR_CTRL_NBAR_MASK
	rebarCtrlBARSize = 0x00003f00 // PCI_REBAR_CTRL_BAR_SIZE
	rebarMaxBARs     = 6
	rebarMinSize     = 1 << 20 // size encoding 0 is 1 MB
)

// parseReBAR decodes the Resizable BAR capability at pos. Supported sizes come from
// Capability bits 31:4 (1 MB to 128 TB) and Control bits 31:16 (256 TB to 8 EB,
// PCIe 4.0 and later), the current size from Control bits 13:8, all as powers of two
// of 1 MB (drivers/pci/pci.c pci_rebar_get_possible_sizes, pci_rebar_get_current_size;
// pciutils ls-ecaps.c cap_rebar).
func parseReBAR(s *space, pos int) []ResizableBAR {
	le := binary.LittleEndian
	b := s.b
	if !s.has(pos, rebarCtrl+4) {
		return nil
	}
	n := int(le.Uint32(b[pos+rebarCtrl:])&rebarCtrlNBAR) >> 5
	n = min(n, rebarMaxBARs)
	var bars []ResizableBAR
	for i := range n {
		at := pos + i*rebarEntrySize
		if !s.has(at, rebarCtrl+4) {
			break
		}
		capReg := le.Uint32(b[at+rebarCap:])
		ctrl := le.Uint32(b[at+rebarCtrl:])
		r := ResizableBAR{BAR: int(ctrl & rebarCtrlBARIdx)}
		for bit := 4; bit < 32; bit++ {
			if capReg&(1<<bit) != 0 {
				r.Supported = append(r.Supported, rebarMinSize<<(bit-4))
			}
		}
		for bit := 16; bit < 32; bit++ {
			if ctrl&(1<<bit) != 0 {
				r.Supported = append(r.Supported, rebarMinSize<<(bit-16+28))
			}
		}
		if enc := (ctrl & rebarCtrlBARSize) >> 8; enc <= 43 {
			r.Current = rebarMinSize << enc
		}
		bars = append(bars, r)
	}
	return bars
}
