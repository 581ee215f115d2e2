package pcie

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// VPD layout (PCI Local Bus Specification 3.0, appendix I; include/uapi/linux/pci_regs.h
// PCI_VPD_*; drivers/pci/vpd.c pci_vpd_size and pci_vpd_find_ro_info_keyword;
// pciutils ls-vpd.c): a list of resource items, each a large one (tag byte with bit 7
// set, a 16-bit little-endian length, the data) or a small one (the length in the
// tag's low three bits), ended by the small End tag. The Identifier String item holds
// the product name; the VPD-R and VPD-W items hold keywords: two ASCII characters, a
// length byte, the value.
const (
	vpdLRDT        = 0x80 // PCI_VPD_LRDT, a large resource data type
	vpdIDString    = 0x82 // PCI_VPD_LRDT_ID_STRING
	vpdRO          = 0x90 // PCI_VPD_LRDT_RO_DATA
	vpdRW          = 0x91 // PCI_VPD_LRDT_RW_DATA
	vpdEndSmall    = 0x78 // PCI_VPD_STIN_END << 3
	vpdSmallLen    = 0x07 // PCI_VPD_SRDT_LEN_MASK
	vpdKeywordHead = 3    // PCI_VPD_INFO_FLD_HDR_SIZE

	// MaxVPDSize is PCI_VPD_MAX_SIZE, the largest VPD the kernel reads (the VPD
	// address register has 15 bits).
	MaxVPDSize = 1 << 15
)

// ErrInvalidVPD is returned (wrapped) by ParseVPD for bytes that are not VPD.
var ErrInvalidVPD = errors.New("pcie: invalid VPD")

// VPD is a function's decoded Vital Product Data, the sysfs vpd attribute.
type VPD struct {
	Name string     // the Identifier String, e.g. the NIC board's product name
	RO   []VPDField // VPD-R keywords, in order (PN, EC, SN, V0..VZ, RV, ...)
	RW   []VPDField // VPD-W keywords, in order
	// Truncated is set when the items ran past the data or no End tag was found
	// before it: what was read up to there is kept, as lspci keeps it.
	Truncated bool
}

// VPDField is one keyword of a VPD-R or VPD-W item.
type VPDField struct {
	Key   string // two characters
	Value []byte
	// Offset is where Value starts in the VPD bytes, so that a value can be
	// replaced in place (snapshots redact serial numbers).
	Offset int
}

// Keyword returns the value of the first VPD-R keyword key ("SN", "V3"), as text.
func (v *VPD) Keyword(key string) (string, bool) {
	for _, f := range v.RO {
		if f.Key == key {
			return string(f.Value), true
		}
	}
	return "", false
}

// ParseVPD decodes VPD as the sysfs vpd attribute returns it. Bytes past MaxVPDSize
// are ignored. The first item must be a large resource (the kernel's pci_vpd_size()
// also gives up otherwise); an item that runs past the data ends the walk and sets
// Truncated.
func ParseVPD(b []byte) (*VPD, error) {
	b = b[:min(len(b), MaxVPDSize)]
	if len(b) == 0 || b[0]&vpdLRDT == 0 {
		return nil, fmt.Errorf("%w: no large resource item at the start", ErrInvalidVPD)
	}
	v := &VPD{}
	for off := 0; ; {
		if off >= len(b) {
			v.Truncated = true
			return v, nil
		}
		tag := b[off]
		if tag == vpdEndSmall {
			return v, nil
		}
		start, n := off+1, int(tag&vpdSmallLen)
		if tag&vpdLRDT != 0 {
			if off+3 > len(b) {
				v.Truncated = true
				return v, nil
			}
			start, n = off+3, int(binary.LittleEndian.Uint16(b[off+1:]))
		}
		if start+n > len(b) {
			v.Truncated = true
			return v, nil
		}
		data := b[start : start+n]
		switch tag {
		case vpdIDString:
			v.Name = string(data)
		case vpdRO:
			v.RO = append(v.RO, keywords(data, start, &v.Truncated)...)
		case vpdRW:
			v.RW = append(v.RW, keywords(data, start, &v.Truncated)...)
		}
		off = start + n
	}
}

// keywords splits a VPD-R or VPD-W item; base is the item data's offset in the VPD.
func keywords(data []byte, base int, truncated *bool) []VPDField {
	var out []VPDField
	for i := 0; i+vpdKeywordHead <= len(data); {
		n := int(data[i+2])
		at := i + vpdKeywordHead
		if at+n > len(data) {
			*truncated = true
			break
		}
		out = append(out, VPDField{Key: string(data[i : i+2]), Value: data[at : at+n], Offset: base + at})
		i = at + n
	}
	return out
}

// ProductData returns the function's decoded VPD, nil when none was read or it does
// not decode.
func (d *Device) ProductData() *VPD {
	if len(d.Record.VPD) == 0 {
		return nil
	}
	v, err := ParseVPD(d.Record.VPD)
	if err != nil {
		return nil
	}
	return v
}
