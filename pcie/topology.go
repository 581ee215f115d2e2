package pcie

// Device is one PCI function in the tree.
type Device struct {
	Record

	// Config is the decoded configuration space, nil when none could be read.
	Config *Config

	// Parent is the bridge whose secondary bus holds this function (the kernel's
	// dev->bus->self); nil on a root bus.
	Parent   *Device
	Children []*Device // functions on this bridge's secondary bus, in address order

	HostBridge *HostBridge

	PF  *Device   // for a VF, its physical function
	VFs []*Device // for a PF, its virtual functions

	// Names from pci.ids; empty when no database was found.
	VendorName, DeviceName, ClassName, SubsystemName string
}

// HostBridge is a root complex as sysfs shows it: /sys/devices/pciDDDD:BB.
type HostBridge struct {
	Name   string // "pci0000:00"
	Domain uint32
	Bus    uint8
	// Devices are the functions directly on the root bus, in devfn order.
	Devices []*Device
}

// Topology is the whole tree.
type Topology struct {
	HostBridges []*HostBridge // in name order
	Devices     []*Device     // every function, in address order
	// Errors lists per-device problems (the device is kept) and tree inconsistencies.
	Errors []error

	byAddr map[Address]*Device
}
