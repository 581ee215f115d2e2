package pcie

import "testing"

func TestACSString(t *testing.T) {
	tests := []struct {
		bits uint16
		want string
	}{
		{0x001d, "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"},
		{0x0000, "SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-"},
		{0x005f, "SrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans+"},
		{0xff7f, "SrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl+ DirectTrans+"},
	}
	for _, tt := range tests {
		if got := ACSString(tt.bits); got != tt.want {
			t.Errorf("ACSString(%#04x) = %q, want %q", tt.bits, got, tt.want)
		}
	}
}

func TestLinkStrings(t *testing.T) {
	tests := []struct {
		l        Link
		str, gts string
		known    bool
	}{
		{Link{5, 16}, "Gen5 x16", "32.0 GT/s", true},
		{Link{1, 1}, "Gen1 x1", "2.5 GT/s", true},
		{Link{2, 4}, "Gen2 x4", "5.0 GT/s", true},
		{Link{7, 8}, "Gen7 x8", "128.0 GT/s", true},
		{Link{0, 16}, "Gen? x16", "unknown", false},
		{Link{4, 0}, "Gen4 x?", "16.0 GT/s", false},
		{Link{8, 4}, "Gen? x4", "unknown", false},
		{Link{}, "Gen? x?", "unknown", false},
	}
	for _, tt := range tests {
		if got := tt.l.String(); got != tt.str {
			t.Errorf("%#v.String() = %q, want %q", tt.l, got, tt.str)
		}
		if got := tt.l.Speed.GTs(); got != tt.gts {
			t.Errorf("%d.GTs() = %q, want %q", tt.l.Speed, got, tt.gts)
		}
		if got := tt.l.Known(); got != tt.known {
			t.Errorf("%#v.Known() = %v, want %v", tt.l, got, tt.known)
		}
	}
}

func TestPortTypeString(t *testing.T) {
	tests := map[PortType]string{
		PortEndpoint:       "Endpoint",
		PortLegacyEndpoint: "Legacy Endpoint",
		PortRootPort:       "Root Port",
		PortUpstream:       "Upstream Port",
		PortDownstream:     "Downstream Port",
		PortPCIeToPCI:      "PCI-Express to PCI/PCI-X Bridge",
		PortPCIToPCIe:      "PCI/PCI-X to PCI-Express Bridge",
		PortRCiEP:          "Root Complex Integrated Endpoint",
		PortRCEC:           "Root Complex Event Collector",
		0x3:                "Unknown type 3",
	}
	for pt, want := range tests {
		if got := pt.String(); got != want {
			t.Errorf("PortType(%d).String() = %q, want %q", pt, got, want)
		}
	}
}

func TestClassAndProductText(t *testing.T) {
	classes := []struct {
		class     uint32
		sub, base string
		want      string
	}{
		{0x020000, "Ethernet controller", "Network controller", "Ethernet controller"},
		{0x00ff00, "", "Unclassified device", "Unclassified device [00ff]"},
		{0xffff00, "", "Unassigned class", "Unassigned class [ffff]"},
		{0x410000, "", "", "Class 4100"},
		{0xfe0012, "", "", "Class fe00"},
	}
	for _, tt := range classes {
		if got := ClassText(tt.class, tt.sub, tt.base); got != tt.want {
			t.Errorf("ClassText(%#06x, %q, %q) = %q, want %q", tt.class, tt.sub, tt.base, got, tt.want)
		}
	}
	products := []struct {
		vendor, device         uint16
		vendorName, deviceName string
		want                   string
	}{
		{0x10de, 0x2335, "NVIDIA Corporation", "GH100 [H200 SXM 141GB]", "NVIDIA Corporation GH100 [H200 SXM 141GB]"},
		{0x8086, 0x347a, "Intel Corporation", "", "Intel Corporation Device 347a"},
		{0x1234, 0x1111, "", "", "Device 1234:1111"},
		{0x10de, 0x2335, "", "NVIDIA H200", "NVIDIA H200"},
	}
	for _, tt := range products {
		if got := ProductText(tt.vendor, tt.device, tt.vendorName, tt.deviceName); got != tt.want {
			t.Errorf("ProductText(%04x, %04x, %q, %q) = %q, want %q", tt.vendor, tt.device, tt.vendorName, tt.deviceName, got, tt.want)
		}
	}
}
