package pcie

// Resource flag bits as the sysfs resource file prints them
// (include/linux/ioport.h IORESOURCE_*).
const (
	ResourceIO       uint64 = 0x00000100 // IORESOURCE_IO
	ResourceMem      uint64 = 0x00000200 // IORESOURCE_MEM
	ResourcePrefetch uint64 = 0x00002000 // IORESOURCE_PREFETCH
	ResourceMem64    uint64 = 0x00100000 // IORESOURCE_MEM_64
)

// Size returns the resource's length in bytes, 0 for an unused slot.
func (r Resource) Size() uint64 {
	if r.End < r.Start || (r.Start == 0 && r.End == 0) {
		return 0
	}
	return r.End - r.Start + 1
}

// IsMem reports whether the resource is a memory BAR or window.
func (r Resource) IsMem() bool { return r.Flags&ResourceMem != 0 }

// Is64 reports whether the resource is a 64-bit memory BAR.
func (r Resource) Is64() bool { return r.Flags&ResourceMem64 != 0 }

// Prefetchable reports whether the resource is prefetchable memory.
func (r Resource) Prefetchable() bool { return r.Flags&ResourcePrefetch != 0 }

// BARs returns the function's base address registers that are in use: resource
// lines 0 to 5 (the kernel's PCI_STD_RESOURCES) with a non-zero size.
func (d *Device) BARs() []Resource {
	var out []Resource
	for _, r := range d.Resources {
		if r.Index <= 5 && r.Size() > 0 {
			out = append(out, r)
		}
	}
	return out
}
