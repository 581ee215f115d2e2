package pcie

import "testing"

// TestRelaxedOrderingBit decodes PCI_EXP_DEVCTL_RELAX_EN (pci_regs.h) from Device
// Control.
func TestRelaxedOrderingBit(t *testing.T) {
	for _, tt := range []struct {
		name   string
		devctl uint16
		size   int
		want   *bool
	}{
		{"set", 0x2810, 256, new(true)},
		{"clear", 0x2800, 256, new(false)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := expressBody(PortEndpoint, false, 5, 16, 0, 5, 16)
			copy(body[expDevCtl-2:], le16(tt.devctl))
			c := newCfg(0x10de, 0x2335, 0x030200, 0x60)
			c.cap(0x60, CapIDExpress, body...)
			cfg, err := ParseConfig(c.bytes(tt.size))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Express == nil {
				t.Fatal("no PCI Express capability decoded")
			}
			got := cfg.Express.RelaxedOrdering
			if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
				t.Errorf("RelaxedOrdering = %v, want %v", ptrString(got), ptrString(tt.want))
			}
		})
	}
}

func ptrString(b *bool) string {
	if b == nil {
		return "unknown"
	}
	if *b {
		return "set"
	}
	return "clear"
}
