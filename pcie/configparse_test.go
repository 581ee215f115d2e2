package pcie

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// cfgBuilder assembles configuration spaces for tests: a 4096-byte image with a
// standard header, a standard capability chain and an extended capability chain.
// bytes(n) returns the first n bytes, so one image gives the root (4096), the
// conventional (256) and the unprivileged (64) view.
type cfgBuilder struct {
	b       [ConfigExpSize]byte
	capNext int // offset of the byte that must point to the next standard capability
	extLast int // offset of the last extended capability header, 0 if none
}

func newCfg(vendor, device uint16, class uint32, hdr uint8) *cfgBuilder {
	c := &cfgBuilder{capNext: offCapList}
	c.put16(offVendor, vendor)
	c.put16(offDevice, device)
	c.b[offClass] = byte(class)
	c.b[offClass+1] = byte(class >> 8)
	c.b[offClass+2] = byte(class >> 16)
	c.b[offHeaderType] = hdr
	if hdr&0x7f == headerCardBus {
		c.capNext = offCBCapList
	}
	return c
}

func (c *cfgBuilder) put16(off int, v uint16) *cfgBuilder {
	binary.LittleEndian.PutUint16(c.b[off:], v)
	return c
}

func (c *cfgBuilder) put32(off int, v uint32) *cfgBuilder {
	binary.LittleEndian.PutUint32(c.b[off:], v)
	return c
}

// cap appends a standard capability at off: ID, a next pointer of 0, then body. It
// sets the Capabilities List status bit and links the previous entry to it.
func (c *cfgBuilder) cap(off int, id uint8, body ...byte) *cfgBuilder {
	c.b[offStatus] |= statusCapList
	c.b[c.capNext] = byte(off)
	c.b[off] = id
	c.b[off+1] = 0
	copy(c.b[off+2:], body)
	c.capNext = off + 1
	return c
}

// ext appends an extended capability at off with a next pointer of 0 and links the
// previous one to it. The first one must be at 0x100.
func (c *cfgBuilder) ext(off int, id uint16, ver uint8, body ...byte) *cfgBuilder {
	if c.extLast != 0 {
		h := binary.LittleEndian.Uint32(c.b[c.extLast:])
		c.put32(c.extLast, h&0x000fffff|uint32(off)<<20)
	}
	c.put32(off, uint32(id)|uint32(ver)<<16)
	copy(c.b[off+4:], body)
	c.extLast = off
	return c
}

func (c *cfgBuilder) bytes(n int) []byte { return append([]byte(nil), c.b[:n]...) }

// expressBody returns a PCI Express capability body (from +2): flags, then link
// capabilities and link status at their offsets.
func expressBody(t PortType, slot bool, capSpeed, capWidth, port, staSpeed, staWidth uint32) []byte {
	body := make([]byte, 0x3a)
	flags := uint16(2) | uint16(t)<<4
	if slot {
		flags |= expFlagsSlot
	}
	binary.LittleEndian.PutUint16(body[0:], flags)
	binary.LittleEndian.PutUint32(body[expLnkCap-2:], capSpeed|capWidth<<4|port<<24)
	binary.LittleEndian.PutUint16(body[expLnkSta-2:], uint16(staSpeed|staWidth<<4))
	return body
}

func le16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }

func le32s(vs ...uint32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return b
}

// fullEndpoint is a root-readable PCIe endpoint with every decoded capability.
func fullEndpoint() *cfgBuilder {
	c := newCfg(0x15b3, 0x1021, 0x020700, 0x80)
	c.put16(offCommand, 0x0406)
	c.b[offRevision] = 0x01
	c.cap(0x40, 0x01, 0x03, 0x00) // power management
	c.cap(0x60, CapIDExpress, expressBody(PortEndpoint, false, 5, 16, 0, 4, 8)...)
	c.cap(0xa0, 0x11) // MSI-X
	c.ext(0x100, ExtCapIDAER, 2)
	c.ext(0x148, ExtCapIDACS, 1, append(le16(0x005f), le16(0x001d)...)...)
	c.ext(0x150, ExtCapIDARI, 1)
	c.ext(0x160, ExtCapIDATS, 1)
	c.ext(0x170, ExtCapIDPRI, 1)
	c.ext(0x180, ExtCapIDPASID, 1)
	c.ext(0x190, ExtCapIDDPC, 1)
	sriov := make([]byte, 0x3c)
	binary.LittleEndian.PutUint16(sriov[0x0e-4:], 64)     // TotalVFs
	binary.LittleEndian.PutUint16(sriov[0x10-4:], 8)      // NumVFs
	binary.LittleEndian.PutUint16(sriov[0x14-4:], 2)      // First VF Offset
	binary.LittleEndian.PutUint16(sriov[0x16-4:], 1)      // VF Stride
	binary.LittleEndian.PutUint16(sriov[0x1a-4:], 0x101e) // VF Device ID
	c.ext(0x200, ExtCapIDSRIOV, 1, sriov...)
	c.ext(0x300, ExtCapIDReBAR, 1, le32s(
		1<<4|1<<5|1<<6, 2<<5|0<<0|2<<8, // BAR0: 1, 2, 4 MB; 2 BARs; current 4 MB
		1<<31, 2|1<<16|28<<8, // BAR2: 128 TB and 256 TB; current 256 TB
	)...)
	c.ext(0x400, 0x0b, 1) // vendor-specific, listed only
	return c
}

func TestParseConfig(t *testing.T) {
	full := fullEndpoint()
	fullExts := []ExtCapability{
		{ID: ExtCapIDAER, Version: 2, Offset: 0x100},
		{ID: ExtCapIDACS, Version: 1, Offset: 0x148},
		{ID: ExtCapIDARI, Version: 1, Offset: 0x150},
		{ID: ExtCapIDATS, Version: 1, Offset: 0x160},
		{ID: ExtCapIDPRI, Version: 1, Offset: 0x170},
		{ID: ExtCapIDPASID, Version: 1, Offset: 0x180},
		{ID: ExtCapIDDPC, Version: 1, Offset: 0x190},
		{ID: ExtCapIDSRIOV, Version: 1, Offset: 0x200},
		{ID: ExtCapIDReBAR, Version: 1, Offset: 0x300},
		{ID: 0x0b, Version: 1, Offset: 0x400},
	}
	fullCaps := []Capability{{0x01, 0x40}, {CapIDExpress, 0x60}, {0x11, 0xa0}}
	fullHeader := Config{
		Vendor: 0x15b3, Device: 0x1021, Command: 0x0406, Status: statusCapList,
		Revision: 1, Class: 0x020700, MultiFunction: true,
	}
	fullExpress := &Express{Offset: 0x60, Version: 2, PortType: PortEndpoint, HasLink: true, MaxPayloadSupported: 128, MaxPayload: 128,
		LinkCap: Link{Speed: 5, Width: 16}, LinkStat: Link{Speed: 4, Width: 8}}
	with := func(base Config, f func(c *Config)) *Config {
		f(&base)
		return &base
	}

	rootPort := newCfg(0x8086, 0x2030, 0x060400, 0x81).
		put16(offStatus, statusCapList)
	rootPort.b[offPrimaryBus], rootPort.b[offSecondaryBus], rootPort.b[offSubordinate] = 0, 1, 5
	rootPort.cap(0x40, CapIDExpress, expressBody(PortRootPort, true, 4, 16, 3, 4, 16)...)

	rciep := newCfg(0x8086, 0x0b25, 0x088000, 0x00).
		cap(0x40, CapIDExpress, expressBody(PortRCiEP, false, 4, 16, 0, 4, 16)...).
		put32(0x40+expDevCap, 0x8003).     // Max_Payload_Size Supported 1024
		put16(0x40+expDevCtl, 0x2810|2<<5) // Max_Payload_Size 512

	cardbus := newCfg(0x104c, 0xac56, 0x060700, 0x02).cap(0x80, 0x01)
	cardbus.b[offPrimaryBus], cardbus.b[offSecondaryBus], cardbus.b[offSubordinate] = 2, 3, 4

	capLoop := newCfg(0x1af4, 0x1041, 0x020000, 0).cap(0x40, 0x09).cap(0x50, 0x05)
	capLoop.b[0x51] = 0x42 // back to 0x40 once masked

	capFF := newCfg(0x1af4, 0x1041, 0x020000, 0).cap(0x40, 0x09).cap(0x50, 0xff).cap(0x60, 0x05)

	expAtEnd := newCfg(0x10de, 0x2335, 0x030200, 0).cap(0xf0, CapIDExpress, expressBody(PortEndpoint, false, 5, 16, 0, 5, 16)[:0x0e]...)

	extLoop := newCfg(0x10de, 0x2335, 0x030200, 0).
		cap(0x40, CapIDExpress, expressBody(PortEndpoint, false, 5, 16, 0, 5, 16)...).
		ext(0x100, ExtCapIDAER, 2).ext(0x200, ExtCapIDACS, 1)
	extLoop.put32(0x200, uint32(ExtCapIDACS)|1<<16|0x100<<20) // ACS points back to AER

	extAllOnes := newCfg(0x10de, 0x2335, 0x030200, 0).
		cap(0x40, CapIDExpress, expressBody(PortEndpoint, false, 5, 16, 0, 5, 16)...).
		put32(0x100, 0xffffffff)

	extTruncACS := newCfg(0x10de, 0x2335, 0x030200, 0).
		cap(0x40, CapIDExpress, expressBody(PortEndpoint, false, 5, 16, 0, 5, 16)...).
		ext(0x100, 0x00, 0).ext(0xffc, ExtCapIDACS, 1)

	noExpress := newCfg(0x1af4, 0x1110, 0x050000, 0).cap(0x40, 0x11)
	noExpress.put32(0x100, uint32(ExtCapIDACS)|1<<16) // junk: no PCIe capability, not walked

	tests := []struct {
		name string
		b    []byte
		want *Config
	}{
		{
			name: "root view of a PCIe endpoint",
			b:    full.bytes(ConfigExpSize),
			want: with(fullHeader, func(c *Config) {
				c.Size, c.CapsKnown, c.ExtCapsKnown = ConfigExpSize, true, true
				c.Capabilities, c.ExtCapabilities = fullCaps, fullExts
				c.Express = fullExpress
				c.ACS = &ACS{Offset: 0x148, Capability: 0x005f, Control: 0x001d}
				c.AER, c.ARI, c.ATS, c.PRI, c.PASID, c.DPC = true, true, true, true, true, true
				c.ATSCap = &ATS{Offset: 0x160}
				c.SRIOV = &SRIOVCap{Offset: 0x200, TotalVFs: 64, NumVFs: 8, Offset1: 2, Stride: 1, VFDevice: 0x101e}
				c.ReBAR = []ResizableBAR{
					{BAR: 0, Supported: []uint64{1 << 20, 2 << 20, 4 << 20}, Current: 4 << 20},
					{BAR: 2, Supported: []uint64{1 << 47, 1 << 48}, Current: 1 << 48},
				}
			}),
		},
		{
			name: "256 bytes: capabilities but no extended space",
			b:    full.bytes(ConfigSize),
			want: with(fullHeader, func(c *Config) {
				c.Size, c.CapsKnown = ConfigSize, true
				c.Capabilities, c.Express = fullCaps, fullExpress
			}),
		},
		{
			name: "unprivileged 64-byte view",
			b:    full.bytes(ConfigHeaderSize),
			want: with(fullHeader, func(c *Config) { c.Size = ConfigHeaderSize }),
		},
		{
			name: "64 bytes without a capability list",
			b:    newCfg(0x1234, 0x1111, 0x030000, 0).bytes(ConfigHeaderSize),
			want: &Config{Size: ConfigHeaderSize, Vendor: 0x1234, Device: 0x1111, Class: 0x030000, CapsKnown: true},
		},
		{
			name: "root port bridge header",
			b:    rootPort.bytes(ConfigSize),
			want: &Config{
				Size: ConfigSize, Vendor: 0x8086, Device: 0x2030, Status: statusCapList, Class: 0x060400,
				HeaderType: 1, MultiFunction: true, PrimaryBus: 0, SecondaryBus: 1, SubordinateBus: 5,
				CapsKnown: true, Capabilities: []Capability{{CapIDExpress, 0x40}},
				Express: &Express{Offset: 0x40, Version: 2, PortType: PortRootPort, Slot: true, HasLink: true, MaxPayloadSupported: 128, MaxPayload: 128,
					LinkCap: Link{4, 16}, LinkStat: Link{4, 16}, PortNum: 3},
			},
		},
		{
			name: "RCiEP has no link registers",
			b:    rciep.bytes(ConfigExpSize),
			want: &Config{
				Size: ConfigExpSize, Vendor: 0x8086, Device: 0x0b25, Status: statusCapList, Class: 0x088000,
				CapsKnown: true, ExtCapsKnown: true, Capabilities: []Capability{{CapIDExpress, 0x40}},
				Express: &Express{Offset: 0x40, Version: 2, PortType: PortRCiEP, MaxPayloadSupported: 1024, MaxPayload: 512},
			},
		},
		{
			name: "CardBus capability pointer at 0x14",
			b:    cardbus.bytes(ConfigSize),
			want: &Config{
				Size: ConfigSize, Vendor: 0x104c, Device: 0xac56, Status: statusCapList, Class: 0x060700,
				HeaderType: 2, PrimaryBus: 2, SecondaryBus: 3, SubordinateBus: 4,
				CapsKnown: true, Capabilities: []Capability{{0x01, 0x80}},
			},
		},
		{
			name: "standard list cycle ends at the first repeat",
			b:    capLoop.bytes(ConfigSize),
			want: &Config{
				Size: ConfigSize, Vendor: 0x1af4, Device: 0x1041, Status: statusCapList, Class: 0x020000,
				CapsKnown: true, Capabilities: []Capability{{0x09, 0x40}, {0x05, 0x50}},
			},
		},
		{
			name: "standard list ends at ID 0xff",
			b:    capFF.bytes(ConfigSize),
			want: &Config{
				Size: ConfigSize, Vendor: 0x1af4, Device: 0x1041, Status: statusCapList, Class: 0x020000,
				CapsKnown: true, Capabilities: []Capability{{0x09, 0x40}},
			},
		},
		{
			name: "PCIe capability whose link registers pass the end",
			b:    expAtEnd.bytes(ConfigSize),
			want: &Config{
				Size: ConfigSize, Vendor: 0x10de, Device: 0x2335, Status: statusCapList, Class: 0x030200,
				CapsKnown: true, Capabilities: []Capability{{CapIDExpress, 0xf0}},
				Express: &Express{Offset: 0xf0, Version: 2, PortType: PortEndpoint, HasLink: true, MaxPayloadSupported: 128, MaxPayload: 128},
			},
		},
		{
			name: "extended list cycle",
			b:    extLoop.bytes(ConfigExpSize),
			want: &Config{
				Size: ConfigExpSize, Vendor: 0x10de, Device: 0x2335, Status: statusCapList, Class: 0x030200,
				CapsKnown: true, ExtCapsKnown: true, Capabilities: []Capability{{CapIDExpress, 0x40}},
				ExtCapabilities: []ExtCapability{{ExtCapIDAER, 2, 0x100}, {ExtCapIDACS, 1, 0x200}},
				Express:         &Express{Offset: 0x40, Version: 2, PortType: PortEndpoint, HasLink: true, LinkCap: Link{5, 16}, LinkStat: Link{5, 16}, MaxPayloadSupported: 128, MaxPayload: 128},
				AER:             true,
				ACS:             &ACS{Offset: 0x200},
			},
		},
		{
			name: "extended header all ones",
			b:    extAllOnes.bytes(ConfigExpSize),
			want: &Config{
				Size: ConfigExpSize, Vendor: 0x10de, Device: 0x2335, Status: statusCapList, Class: 0x030200,
				CapsKnown: true, ExtCapsKnown: true, Capabilities: []Capability{{CapIDExpress, 0x40}},
				Express: &Express{Offset: 0x40, Version: 2, PortType: PortEndpoint, HasLink: true, LinkCap: Link{5, 16}, LinkStat: Link{5, 16}, MaxPayloadSupported: 128, MaxPayload: 128},
			},
		},
		{
			name: "null capability followed, ACS cut off by the end of the buffer",
			b:    extTruncACS.bytes(ConfigExpSize),
			want: &Config{
				Size: ConfigExpSize, Vendor: 0x10de, Device: 0x2335, Status: statusCapList, Class: 0x030200,
				CapsKnown: true, ExtCapsKnown: true, Capabilities: []Capability{{CapIDExpress, 0x40}},
				ExtCapabilities: []ExtCapability{{0, 0, 0x100}, {ExtCapIDACS, 1, 0xffc}},
				Express:         &Express{Offset: 0x40, Version: 2, PortType: PortEndpoint, HasLink: true, LinkCap: Link{5, 16}, LinkStat: Link{5, 16}, MaxPayloadSupported: 128, MaxPayload: 128},
			},
		},
		{
			name: "conventional PCI function: no extended space even at 4096 bytes",
			b:    noExpress.bytes(ConfigExpSize),
			want: &Config{
				Size: ConfigExpSize, Vendor: 0x1af4, Device: 0x1110, Status: statusCapList, Class: 0x050000,
				CapsKnown: true, Capabilities: []Capability{{0x11, 0x40}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseConfig(tt.b)
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseConfig mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseConfigExtTTL(t *testing.T) {
	// 600 chained headers, more than the kernel's 480-step bound.
	c := newCfg(0x10de, 0x2335, 0x030200, 0).
		cap(0x40, CapIDExpress, expressBody(PortEndpoint, false, 5, 16, 0, 5, 16)...)
	for i := range 600 {
		c.ext(ConfigSize+4*i, 0x0b, 1)
	}
	got, err := ParseConfig(c.bytes(ConfigExpSize))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.ExtCapabilities); n != extCapTTL {
		t.Errorf("walked %d extended capabilities, want the bound %d", n, extCapTTL)
	}
}

func TestParseConfigErrors(t *testing.T) {
	absent := newCfg(0xffff, 0xffff, 0xffffff, 0xff).bytes(ConfigSize)
	for _, tt := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"shorter than the header", fullEndpoint().bytes(63)},
		{"all ones", absent},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig(tt.b)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("ParseConfig error = %v, want ErrInvalidConfig", err)
			}
			if c != nil {
				t.Errorf("ParseConfig returned %+v with the error", c)
			}
		})
	}
}

// TestParseConfigSnapshot decodes config files of a real machine (an H200 in a
// Firecracker VM; see testdata/h200-2gpu-vm).
func TestParseConfigSnapshot(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "h200-2gpu-vm", "0000_00_06.0.config"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	type summary struct {
		Vendor, Device uint16
		Class          uint32
		CapsKnown      bool
		ExtCapsKnown   bool
		Express        *Express
		ACS            *ACS
		AER            bool
		NCaps          int
	}
	want := summary{
		Vendor: 0x10de, Device: 0x2335, Class: 0x030200, CapsKnown: true, ExtCapsKnown: true,
		Express: &Express{Offset: 0x60, Version: 2, PortType: PortEndpoint, HasLink: true,
			LinkCap: Link{5, 16}, LinkStat: Link{5, 16}, MaxPayloadSupported: 256, MaxPayload: 256},
		AER:   true,
		NCaps: 4,
	}
	got := summary{c.Vendor, c.Device, c.Class, c.CapsKnown, c.ExtCapsKnown, c.Express, c.ACS, c.AER, len(c.Capabilities)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("snapshot config mismatch (-want +got):\n%s", diff)
	}
}

func FuzzParseConfig(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "h200-2gpu-vm", "*.config"))
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:ConfigHeaderSize])
	}
	f.Add(fullEndpoint().bytes(ConfigExpSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err != nil {
			if c != nil {
				t.Fatalf("config %+v returned with error %v", c, err)
			}
			return
		}
		if c.Size != len(b) {
			t.Errorf("Size = %d, want %d", c.Size, len(b))
		}
		if len(c.Capabilities) > capTTL || len(c.ExtCapabilities) > extCapTTL {
			t.Errorf("walk exceeded its bound: %d, %d", len(c.Capabilities), len(c.ExtCapabilities))
		}
		if c.ExtCapsKnown && (!c.CapsKnown || c.Express == nil || len(b) < ConfigExpSize) {
			t.Errorf("ExtCapsKnown without a PCIe capability in 4096 bytes")
		}
		if len(b) < ConfigSize && (c.Express != nil || c.ACS != nil) {
			t.Errorf("capabilities decoded from %d bytes", len(b))
		}
		for _, e := range c.ExtCapabilities {
			if e.Offset < ConfigSize || int(e.Offset)+4 > len(b) {
				t.Errorf("extended capability at %#x outside [0x100, %#x)", e.Offset, len(b))
			}
		}
	})
}

// TestPayloadSize decodes every Max_Payload_Size encoding of DevCap and DevCtl
// (include/uapi/linux/pci_regs.h): 128 << v, the reserved 6 and 7 unknown.
func TestPayloadSize(t *testing.T) {
	want := []int{128, 256, 512, 1024, 2048, 4096, 0, 0}
	for v, w := range want {
		if got := payloadSize(uint16(v)); got != w {
			t.Errorf("payloadSize(%d) = %d, want %d", v, got, w)
		}
	}
}
