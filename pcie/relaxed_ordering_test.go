package pcie

import "testing"

// TestRelaxedOrdering decodes PCI_EXP_DEVCTL_RELAX_EN (pci_regs.h) from Device
// Control, unknown without the bytes.
func TestRelaxedOrdering(t *testing.T) {
	for _, tt := range []struct {
		name      string
		devctl    uint16
		size      int
		on, known bool
	}{
		{"set", 0x2810, 256, true, true},
		{"clear", 0x2800, 256, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := expressBody(PortEndpoint, false, 5, 16, 0, 5, 16)
			copy(body[expDevCtl-2:], le16(tt.devctl))
			c := newCfg(0x10de, 0x2335, 0x030200, 0x60)
			c.cap(0x60, CapIDExpress, body...)
			raw := c.bytes(tt.size)
			cfg, err := ParseConfig(raw)
			if err != nil {
				t.Fatal(err)
			}
			d := &Device{Record: Record{Config: raw}, Config: cfg}
			if on, known := d.RelaxedOrdering(); on != tt.on || known != tt.known {
				t.Errorf("RelaxedOrdering() = %t, %t; want %t, %t", on, known, tt.on, tt.known)
			}
		})
	}
	d := &Device{}
	if _, known := d.RelaxedOrdering(); known {
		t.Error("known without config")
	}
}
