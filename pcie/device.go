package pcie

// Upstream returns the bridge above d as the kernel's pci_upstream_bridge()
// (include/linux/pci.h) does: a VF is replaced by its PF first, and a function on a
// root bus has none (nil).
func (d *Device) Upstream() *Device {
	if d.PF != nil {
		return d.PF.Parent
	}
	return d.Parent
}

// IsVF reports whether d is an SR-IOV virtual function.
func (d *Device) IsVF() bool { return d.PhysFn != nil }

// PortType returns the PCI Express device/port type. ok is false when it is unknown:
// the capability list could not be read, or the function has no PCI Express capability.
func (d *Device) PortType() (t PortType, ok bool) {
	if d.Config == nil || d.Config.Express == nil {
		return 0, false
	}
	return d.Config.Express.PortType, true
}

// ACS returns the function's ACS capability. known is false when extended
// configuration space could not be read (for example without CAP_SYS_ADMIN); when
// known is true, a nil acs means the function has no ACS capability.
func (d *Device) ACS() (acs *ACS, known bool) {
	if d.Config == nil {
		return nil, false
	}
	if d.Config.ACS != nil {
		return d.Config.ACS, true
	}
	// Without a PCI Express capability there is no extended space to search, so the
	// absence is known as soon as the standard capability list was read.
	if d.Config.CapsKnown && d.Config.Express == nil {
		return nil, true
	}
	return nil, d.Config.ExtCapsKnown
}

// Device returns the function at a, or nil.
func (t *Topology) Device(a Address) *Device { return t.byAddr[a] }

// FirstDevice returns the first function on the host bridge's root bus (lowest
// devfn), the device the kernel's __host_bridge_whitelist() (drivers/pci/p2pdma.c)
// compares with its table. It is nil for an empty root bus.
func (h *HostBridge) FirstDevice() *Device {
	if len(h.Devices) == 0 {
		return nil
	}
	return h.Devices[0]
}
