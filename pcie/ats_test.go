package pcie_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/pcie"
)

// TestATS decodes the ATS capability as lspci shows it ("ATSCtl: Enable+"), and
// tells a function without one from one whose extended space was not read.
func TestATS(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opt     []fixture.Option
		view    int
		present bool
		enabled bool
		known   bool
	}{
		{"enabled", []fixture.Option{fixture.ATS(true)}, 0, true, true, true},
		{"capability only", []fixture.Option{fixture.ATS(false)}, 0, true, false, true},
		{"none", nil, 0, false, false, true},
		{"not read", []fixture.Option{fixture.ATS(true)}, 64, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := fixture.New().ConfigView(tc.view)
			rp := m.HostBridge(0, 0, 0).RootPort(1, 0)
			nic := rp.Endpoint(append([]fixture.Option{fixture.ID(0x15b3, 0x1023), fixture.Class(0x020700)}, tc.opt...)...)
			root := testsupport.Root(t, m)
			b, err := os.ReadFile(filepath.Join(root, "sys/bus/pci/devices", nic.String(), "config"))
			if err != nil {
				t.Fatal(err)
			}
			c, err := pcie.ParseConfig(b)
			if err != nil {
				t.Fatal(err)
			}
			d := &pcie.Device{Config: c}
			ats, known := d.ATSState()
			if known != tc.known || (ats != nil) != tc.present || (ats != nil && ats.Enabled() != tc.enabled) {
				t.Fatalf("ATS %+v known %v, want present %v enabled %v known %v", ats, known, tc.present, tc.enabled, tc.known)
			}
			if ats != nil && (ats.QueueDepth() != 0 || ats.STU() != 0) {
				t.Errorf("queue depth %d, STU %d", ats.QueueDepth(), ats.STU())
			}
		})
	}
}
