package node_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/node"
)

// TestMissingConfigOnce removes config files from the degraded-link machine (seven
// functions): one missing file stays that function's error; when several are
// missing the tree gets one warning and no per-function errors.
func TestMissingConfigOnce(t *testing.T) {
	tests := []struct {
		remove     int // config files removed, in address order
		wantErrs   int // topology errors
		wantFolded bool
	}{
		{0, 0, false},
		{1, 1, false},
		{3, 0, true},
		{7, 0, true},
	}
	for _, tt := range tests {
		dir := testsupport.Root(t, fixture.DegradedLink())
		links, err := filepath.Glob(filepath.Join(dir, "sys", "bus", "pci", "devices", "*"))
		if err != nil || len(links) != 7 {
			t.Fatalf("devices: %v, %v", links, err)
		}
		for _, l := range links[:tt.remove] {
			if err := os.Remove(filepath.Join(l, "config")); err != nil {
				t.Fatal(err)
			}
		}
		n := testnode.Root(t, dir, node.Options{NoNames: true, NoPlatform: true})
		folded := 0
		for _, w := range n.Warnings {
			if errors.Is(w, node.ErrNoConfig) {
				folded++
			}
		}
		if len(n.Topology.Errors) != tt.wantErrs || (folded == 1) != tt.wantFolded || folded > 1 {
			t.Errorf("%d removed: %d topology errors, %d folded warnings (%v); want %d errors, folded %v",
				tt.remove, len(n.Topology.Errors), folded, n.Warnings, tt.wantErrs, tt.wantFolded)
		}
	}
}
