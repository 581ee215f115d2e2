package pcie

import "encoding/binary"

// RelaxedOrdering reports the Enable Relaxed Ordering bit of d's Device Control
// register (PCI_EXP_DEVCTL_RELAX_EN in include/uapi/linux/pci_regs.h): the
// function may set the Relaxed Ordering attribute in the requests it sends only
// with it set. known is false without a decoded PCI Express capability or when
// Device Control lies past the config bytes read.
func (d *Device) RelaxedOrdering() (on, known bool) {
	if d.Config == nil || d.Config.Express == nil {
		return false, false
	}
	off := int(d.Config.Express.Offset) + expDevCtl
	if off+2 > len(d.Record.Config) {
		return false, false
	}
	return binary.LittleEndian.Uint16(d.Record.Config[off:])&expDevCtlRelaxEn != 0, true
}
