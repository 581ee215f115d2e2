package sysfs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/pcie"
)

// writableDGX writes the DGX-like synthetic node to a temporary root and returns the
// root and the ACS capability offset of the root port 0000:15:01.0 (ACS Control
// SV|RR|CR|UF).
func writableDGX(t *testing.T) (root string, rp pcie.Address, capOff uint16) {
	t.Helper()
	root = filepath.Join(t.TempDir(), "root")
	if err := fixture.DGXH100Like().NoDeviceNodes().Write(root); err != nil {
		t.Fatal(err)
	}
	rp, err := pcie.ParseAddress("0000:15:01.0")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "sys/bus/pci/devices", rp.String(), "config"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := pcie.ParseConfig(b)
	if err != nil || c.ACS == nil || c.ACS.Control != 0x001d {
		t.Fatalf("fixture root port: %v, ACS %+v", err, c.ACS)
	}
	return root, rp, c.ACS.Offset
}

func TestWriteACSControl(t *testing.T) {
	root, rp, off := writableDGX(t)
	w, err := WriteACSControl(root, rp, off, 0x002c, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := ACSControlWrite{Address: rp, Register: off + 6, Before: 0x001d, After: 0x0011, Written: true}
	if diff := cmp.Diff(want, w); diff != "" {
		t.Errorf("first write (-want +got):\n%s", diff)
	}
	// The file itself holds the new value, and nothing else changed.
	b, err := os.ReadFile(filepath.Join(root, "sys/bus/pci/devices", rp.String(), "config"))
	if err != nil {
		t.Fatal(err)
	}
	if c, err := pcie.ParseConfig(b); err != nil || c.ACS.Control != 0x0011 || c.ACS.Capability != 0x005f {
		t.Errorf("config after the write: %v %+v", err, c.ACS)
	}
	w, err = WriteACSControl(root, rp, off, 0x002c, 0)
	if err != nil {
		t.Fatal(err)
	}
	want = ACSControlWrite{Address: rp, Register: off + 6, Before: 0x0011, After: 0x0011}
	if diff := cmp.Diff(want, w); diff != "" {
		t.Errorf("second write (-want +got):\n%s", diff)
	}
}

// TestWriteACSControlSets sets Direct Translated P2P and clears Source Validation in
// one write, the kind of change a virtualization-host or Data Direct plan makes.
func TestWriteACSControlSets(t *testing.T) {
	root, rp, off := writableDGX(t)
	w, err := WriteACSControl(root, rp, off, pcie.ACSDirectTranslated|pcie.ACSSourceValidation, pcie.ACSDirectTranslated)
	if err != nil {
		t.Fatal(err)
	}
	want := ACSControlWrite{Address: rp, Register: off + 6, Before: 0x001d, After: 0x005c, Written: true}
	if diff := cmp.Diff(want, w); diff != "" {
		t.Errorf("write (-want +got):\n%s", diff)
	}
}

func TestWriteACSControlRefuses(t *testing.T) {
	root, rp, off := writableDGX(t)
	gpu, err := pcie.ParseAddress("0000:15:00.0")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		addr  pcie.Address
		off   uint16
		mask  uint16
		value uint16
	}{
		{"another offset", rp, off + 4, 0x002c, 0},
		{"the capability header", rp, off - 6, 0x002c, 0},
		{"undefined bits", rp, off, 0x0180, 0},
		{"no bits", rp, off, 0, 0},
		{"a value outside the mask", rp, off, 0x0040, 0x0044},
		{"a function without ACS", gpu, off, 0x002c, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := WriteACSControl(root, tc.addr, tc.off, tc.mask, tc.value); !errors.Is(err, ErrRefusedWrite) {
				t.Errorf("error %v, want ErrRefusedWrite", err)
			}
		})
	}
	// A config that is not a regular file, and one whose link leads out of the root.
	dir := filepath.Join(root, "sys/bus/pci/devices", rp.String())
	cfg := filepath.Join(dir, "config")
	if err := os.Remove(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(cfg, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteACSControl(root, rp, off, 0x002c, 0); err == nil {
		t.Error("a directory as config: no error")
	}
	if err := os.Remove(cfg); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(outside, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteACSControl(root, rp, off, 0x002c, 0); err == nil {
		t.Error("a config linked out of the root: no error")
	}
}
