package check_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/check"
)

// TestTopologyFixtures pins what the machines made for the topology rules show:
// a VM's guest ACS does not apply, NVMe behind VMD gets the VMD fix.
func TestTopologyFixtures(t *testing.T) {
	for _, tt := range []struct {
		machine string
		want    map[string]check.Status
		fix     map[string]string // check → a substring of its first remediation
	}{
		{"vm-acs", map[string]check.Status{"acs_path": check.Skip, "p2p_reachability": check.Skip}, nil},
		{"vmd-gpu", map[string]check.Status{"p2p_reachability": check.Warn, "acs_path": check.Pass},
			map[string]string{"p2p_reachability": "disable Intel VMD"}},
	} {
		t.Run(tt.machine, func(t *testing.T) {
			r := report(t, tt.machine)
			got := map[string]check.Status{}
			for id := range tt.want {
				got[id] = result(t, r, id).Status
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
			for id, fix := range tt.fix {
				if c := result(t, r, id); len(c.Remediation) == 0 || !strings.Contains(c.Remediation[0], fix) {
					t.Errorf("%s remediation %q, want %q first", id, c.Remediation, fix)
				}
			}
		})
	}
}
