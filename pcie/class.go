package pcie

// PCI class codes the queries use (include/linux/pci_ids.h PCI_CLASS_*), as
// base<<8 | subclass, or base<<16 | subclass<<8 | prog-if where noted.
const (
	ClassVGA             = 0x0300   // PCI_CLASS_DISPLAY_VGA
	Class3D              = 0x0302   // PCI_CLASS_DISPLAY_3D
	ClassEthernet        = 0x0200   // PCI_CLASS_NETWORK_ETHERNET
	ClassInfiniBand      = 0x0207   // InfiniBand controller (pci.ids class 02, subclass 07)
	ClassNVMe            = 0x010802 // PCI_CLASS_STORAGE_EXPRESS, with prog-if 02 (NVM Express)
	ClassAccelerator     = 0x1200   // PCI_CLASS_ACCELERATOR_PROCESSING
	ClassBridgePCI       = 0x0604   // PCI_CLASS_BRIDGE_PCI
	ClassBridgeCardBus   = 0x0607   // PCI_CLASS_BRIDGE_CARDBUS
	ClassBridgePCISemiTr = 0x0609   // semi-transparent PCI-to-PCI bridge (pci.ids class 06, subclass 09)
)

// ClassCode returns the class code, base<<16 | subclass<<8 | prog-if: from config
// space when it was decoded, else the sysfs class attribute.
func (d *Device) ClassCode() uint32 {
	if d.Config != nil {
		return d.Config.Class
	}
	return d.Class
}

// VendorID returns the vendor ID: from config space when it was decoded, else the
// sysfs vendor attribute.
func (d *Device) VendorID() uint16 {
	if d.Config != nil {
		return d.Config.Vendor
	}
	return d.Vendor
}

// IsBridge reports whether d is a bridge with a secondary bus: header type 1
// (PCI-to-PCI) or 2 (CardBus), as the kernel's pci_is_bridge() (include/linux/pci.h)
// tests. Without config space it goes by the class code: PCI-to-PCI, semi-transparent
// and CardBus bridges.
func (d *Device) IsBridge() bool {
	if d.Config != nil {
		return d.Config.HeaderType == headerBridge || d.Config.HeaderType == headerCardBus
	}
	switch d.Class >> 8 {
	case ClassBridgePCI, ClassBridgeCardBus, ClassBridgePCISemiTr:
		return true
	}
	return false
}

// GPU vendors: a display controller of another vendor is a server's BMC video
// (ASPEED, Matrox), not a GPU.
const (
	VendorNVIDIA = 0x10de
	VendorAMD    = 0x1002 // ATI Technologies, AMD's GPU vendor ID
	VendorIntel  = 0x8086
)

// IsGPU reports whether d is a GPU: a VGA compatible (0x0300) or 3D (0x0302)
// display controller from NVIDIA, AMD or Intel. Data-centre NVIDIA GPUs are 3D
// controllers; the VGA function of a BMC is left out, so GPUs() numbers GPUs the
// way nvidia-smi does on servers. Other display controllers (0x0380) are not
// counted.
func (d *Device) IsGPU() bool {
	c := d.ClassCode() >> 8
	if c != ClassVGA && c != Class3D {
		return false
	}
	switch d.VendorID() {
	case VendorNVIDIA, VendorAMD, VendorIntel:
		return true
	}
	return false
}

// IsNIC reports whether d is an Ethernet (0x0200) or InfiniBand (0x0207) controller.
func (d *Device) IsNIC() bool {
	c := d.ClassCode() >> 8
	return c == ClassEthernet || c == ClassInfiniBand
}

// IsNVMe reports whether d is an NVM Express controller (class 0x010802).
func (d *Device) IsNVMe() bool { return d.ClassCode() == ClassNVMe }

// IsAccelerator reports whether d is a processing accelerator (class 0x1200).
func (d *Device) IsAccelerator() bool { return d.ClassCode()>>8 == ClassAccelerator }

// filter returns the devices, in address order, for which keep is true.
func (t *Topology) filter(keep func(*Device) bool) []*Device {
	var out []*Device
	for _, d := range t.Devices {
		if keep(d) {
			out = append(out, d)
		}
	}
	return out
}

// GPUs returns the functions for which IsGPU is true, in address order.
func (t *Topology) GPUs() []*Device { return t.filter((*Device).IsGPU) }

// NICs returns the functions for which IsNIC is true, VFs included, in address order.
func (t *Topology) NICs() []*Device { return t.filter((*Device).IsNIC) }

// NVMe returns the NVMe controllers, in address order.
func (t *Topology) NVMe() []*Device { return t.filter((*Device).IsNVMe) }

// accelerators returns the processing accelerators, in address order.
func (t *Topology) accelerators() []*Device { return t.filter((*Device).IsAccelerator) }

// bridges returns the functions for which IsBridge is true, in address order.
func (t *Topology) bridges() []*Device { return t.filter((*Device).IsBridge) }

// Endpoints returns the type-0 functions (every function that is not a bridge, host
// bridge functions such as 00:00.0 included), in address order.
func (t *Topology) Endpoints() []*Device {
	return t.filter(func(d *Device) bool { return !d.IsBridge() })
}
