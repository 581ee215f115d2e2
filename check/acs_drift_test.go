package check_test

import (
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/provision"
)

// TestACSDrift: what fix --apply recorded and what the boot parameter set are
// compared with ACS Control as read, per kernel release.
func TestACSDrift(t *testing.T) {
	const record = `{"schema_version": "1", "kernel": "6.8", "use": "bare-metal", "applied": [
		{"address": "0000:17:00.0", "mask": "0x002c", "value": "0x0000"}]}`
	for _, tc := range []struct {
		name   string
		build  func() *fixture.Machine
		status check.Status
		want   string
	}{
		{"nothing recorded", fixture.DGXH100Like, check.Skip, "no record of p2pcheck fix --apply"},
		{"fix --apply undone", func() *fixture.Machine { return fixture.DGXH100Like().File(provision.StatePath, record) },
			check.Warn, "p2pcheck fix --apply (bare-metal, Linux 6.8) set them to 0x0000"},
		{"fix --apply holds", func() *fixture.Machine { return fixture.DGXH100ACSOff().File(provision.StatePath, record) },
			check.Pass, "ACS holds"},
		{"config_acs restored", func() *fixture.Machine {
			return fixture.DGXH100Like().Kernel("6.12.48").Cmdline(`ro "pci=config_acs=0010001@0000:15:01.0/0.0/0.0"`)
		}, check.Warn, "pci=config_acs=0010001 set them to 0x0011"},
		{"disable_acs_redir holds", func() *fixture.Machine {
			return fixture.DGXH100ACSOff().Kernel("6.6.63").Cmdline("ro pci=disable_acs_redir=0000:15:01.0/0.0/0.0")
		}, check.Pass, "ACS holds"},
		{"a broken parser", func() *fixture.Machine {
			return fixture.DGXH100Like().Kernel("6.11.5").Cmdline("ro pci=disable_acs_redir=0000:15:01.0/0.0/0.0")
		}, check.Skip, "without its fix 9cf8a952d57b"},
		{"config_acs unknown to 6.1", func() *fixture.Machine {
			return fixture.DGXH100Like().Kernel("6.1.0-28-amd64").Cmdline("ro pci=config_acs=0010001@0000:15:01.0/0.0/0.0")
		}, check.Skip, "does not know pci=config_acs="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testnode.Machine(t, tc.build(), node.Options{NoNames: true})
			r := run1(t, check.NewFacts(n, check.Inputs{}), "acs_drift")
			if r.Status != tc.status || !strings.Contains(r.Summary+"\n"+findings(r), tc.want) {
				t.Errorf("acs_drift = %s %q, want %s with %q:\n%s", r.Status, r.Summary, tc.status, tc.want, findings(r))
			}
		})
	}
}
