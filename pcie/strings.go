package pcie

import (
	"strconv"
	"strings"
)

// maxLinkSpeed is the newest generation LinkSpeed knows (PCIe 7.0, 128 GT/s).
const maxLinkSpeed LinkSpeed = 7

// linkGTs are the per-lane transfer rates, as the kernel's pci_speed_string()
// (drivers/pci/probe.c) prints them without the " PCIe" suffix.
var linkGTs = [...]string{1: "2.5 GT/s", 2: "5.0 GT/s", 3: "8.0 GT/s", 4: "16.0 GT/s",
	5: "32.0 GT/s", 6: "64.0 GT/s", 7: "128.0 GT/s"}

// linkMTs are the same rates in MT/s, for comparing links.
var linkMTs = [...]int{1: 2500, 2: 5000, 3: 8000, 4: 16000, 5: 32000, 6: 64000, 7: 128000}

// String returns the generation, "Gen1" to "Gen7", or "Gen?" when unknown.
func (s LinkSpeed) String() string {
	if s == 0 || s > maxLinkSpeed {
		return "Gen?"
	}
	return "Gen" + strconv.Itoa(int(s))
}

// known reports whether s is a generation LinkSpeed knows.
func (s LinkSpeed) known() bool { return s != 0 && s <= maxLinkSpeed }

// GTs returns the per-lane rate as sysfs and lspci print it, for example
// "32.0 GT/s", or "unknown".
func (s LinkSpeed) GTs() string {
	if s == 0 || s > maxLinkSpeed {
		return "unknown"
	}
	return linkGTs[s]
}

// String returns the link as "Gen5 x16"; an unknown speed or width prints as "?"
// ("Gen? x16", "Gen5 x?").
func (l Link) String() string {
	w := "?"
	if l.Width > 0 {
		w = strconv.Itoa(l.Width)
	}
	return l.Speed.String() + " x" + w
}

// Known reports whether both speed and width are known.
func (l Link) Known() bool { return l.Speed != 0 && l.Speed <= maxLinkSpeed && l.Width > 0 }

// rate is the raw link rate in MT/s summed over lanes; 0 when not Known.
func (l Link) rate() int {
	if !l.Known() {
		return 0
	}
	return linkMTs[l.Speed] * l.Width
}

// String returns the port type in lspci's words (pciutils ls-caps.c cap_express):
// "Endpoint", "Legacy Endpoint", "Root Port", "Upstream Port", "Downstream Port",
// "PCI-Express to PCI/PCI-X Bridge", "PCI/PCI-X to PCI-Express Bridge",
// "Root Complex Integrated Endpoint", "Root Complex Event Collector", or
// "Unknown type N".
func (t PortType) String() string {
	switch t {
	case PortEndpoint:
		return "Endpoint"
	case PortLegacyEndpoint:
		return "Legacy Endpoint"
	case PortRootPort:
		return "Root Port"
	case PortUpstream:
		return "Upstream Port"
	case PortDownstream:
		return "Downstream Port"
	case PortPCIeToPCI:
		return "PCI-Express to PCI/PCI-X Bridge"
	case PortPCIToPCIe:
		return "PCI/PCI-X to PCI-Express Bridge"
	case PortRCiEP:
		return "Root Complex Integrated Endpoint"
	case PortRCEC:
		return "Root Complex Event Collector"
	}
	return "Unknown type " + strconv.Itoa(int(t))
}

// acsWords are lspci's names for the ACS bits, in bit order (pciutils ls-ecaps.c
// cap_acs).
var acsWords = [...]struct {
	bit  uint16
	word string
}{
	{ACSSourceValidation, "SrcValid"},
	{ACSTranslationBlock, "TransBlk"},
	{ACSRequestRedirect, "ReqRedir"},
	{ACSCompletionRedirect, "CmpltRedir"},
	{ACSUpstreamForwarding, "UpstreamFwd"},
	{ACSEgressControl, "EgressCtrl"},
	{ACSDirectTranslated, "DirectTrans"},
}

// ACSString formats ACS Capability or Control bits as lspci -vvv prints its ACSCap
// and ACSCtl lines, for example
// "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
// for 0x001d. Bits above DirectTrans are not printed, as lspci does not.
func ACSString(bits uint16) string {
	var sb strings.Builder
	for i, a := range acsWords {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(a.word)
		if bits&a.bit != 0 {
			sb.WriteByte('+')
		} else {
			sb.WriteByte('-')
		}
	}
	return sb.String()
}

// ClassText returns the name lspci gives a class code (base<<16 | sub<<8 |
// prog-if), following pciutils lib/names.c pci_lookup_name (PCI_LOOKUP_CLASS): the
// subclass's name when pci.ids lists it; else the base class's name followed by the
// four-digit code, "Unclassified device [00ff]"; else "Class 4100". subName and
// baseName are the pci.ids names, "" when not listed.
func ClassText(class uint32, subName, baseName string) string {
	code := hex4(uint16(class >> 8))
	switch {
	case subName != "":
		return subName
	case baseName != "":
		return baseName + " [" + code + "]"
	}
	return "Class " + code
}

// ProductText returns the vendor and device names as lspci prints them on a
// device's line, following pciutils lib/names.c format_name_pair: "NVIDIA
// Corporation GH100 [H200 SXM 141GB]", "Intel Corporation Device 347a" for a device
// pci.ids does not list, "Device 1234:1111" for an unknown vendor. A device name
// without a vendor name (one NVML gave, which names the vendor itself) is printed
// alone.
func ProductText(vendor, device uint16, vendorName, deviceName string) string {
	switch {
	case vendorName != "" && deviceName != "":
		return vendorName + " " + deviceName
	case deviceName != "":
		return deviceName
	case vendorName != "":
		return vendorName + " Device " + hex4(device)
	}
	return "Device " + hex4(vendor) + ":" + hex4(device)
}

// hex4 formats v as four lower-case hexadecimal digits.
func hex4(v uint16) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[v>>12], digits[v>>8&0xf], digits[v>>4&0xf], digits[v&0xf]})
}
