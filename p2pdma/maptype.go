package p2pdma

import "fmt"

// MapType is the kernel's enum pci_p2pdma_map_type (include/linux/pci-p2pdma.h; in
// 6.1 include/linux/dma-map-ops.h), with the kernel's numeric values. The zero value
// is Unknown, so a Verdict that was never computed never reads as allowed.
type MapType uint8

// Map types. PCI_P2PDMA_MAP_NONE (1) only tags non-P2PDMA pages in the kernel's mapping
// helpers and is never a verdict, so it has no constant here.
const (
	// Unknown is PCI_P2PDMA_MAP_UNKNOWN. The kernel uses it for "not computed yet";
	// here it means a fact the verdict depends on could not be read.
	Unknown MapType = 0
	// NotSupported is PCI_P2PDMA_MAP_NOT_SUPPORTED: the path crosses a host bridge the
	// kernel does not allow, and mapping fails.
	NotSupported MapType = 2
	// BusAddr is PCI_P2PDMA_MAP_BUS_ADDR: the traffic stays below a common upstream
	// bridge with no ACS redirect on the way, and DMA uses PCI bus addresses.
	BusAddr MapType = 3
	// ThruHostBridge is PCI_P2PDMA_MAP_THRU_HOST_BRIDGE: the traffic goes through the
	// root complex and is mapped like ordinary DMA (through the IOMMU if there is one).
	ThruHostBridge MapType = 4
)

var mapTypeNames = [...]string{
	Unknown:        "unknown",
	NotSupported:   "not-supported",
	BusAddr:        "bus-addr",
	ThruHostBridge: "thru-host-bridge",
}

// String returns the name used in the pairs JSON and by the oracle kernel:
// "unknown", "not-supported", "bus-addr" or "thru-host-bridge".
func (m MapType) String() string {
	if int(m) < len(mapTypeNames) && (m == Unknown || mapTypeNames[m] != "") {
		return mapTypeNames[m]
	}
	return fmt.Sprintf("MapType(%d)", uint8(m))
}

// MarshalText implements encoding.TextMarshaler with the String form.
func (m MapType) MarshalText() ([]byte, error) {
	if int(m) >= len(mapTypeNames) || (m != Unknown && mapTypeNames[m] == "") {
		return nil, fmt.Errorf("p2pdma: invalid map type %d", uint8(m))
	}
	return []byte(mapTypeNames[m]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler; it accepts the String forms.
func (m *MapType) UnmarshalText(b []byte) error {
	for i, name := range mapTypeNames {
		if name != "" && name == string(b) {
			*m = MapType(i)
			return nil
		}
	}
	return fmt.Errorf("p2pdma: invalid map type %q", b)
}
