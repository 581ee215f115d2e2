package provision

import (
	"errors"
	"testing"

	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
)

// TestDetectMode: every ConnectX NIC with ATS is a virtualization host, none is bare
// metal, NICs that disagree or ATS not read cannot be told, and the Data Direct shape
// is bare metal whatever ATS says.
func TestDetectMode(t *testing.T) {
	mixed := fixture.HGXInline(false)
	mixed.Func("nic0").Set(fixture.ATS(false))
	for _, tc := range []struct {
		name string
		m    *fixture.Machine
		want Mode
		err  bool
	}{
		{"ATS on every NIC", fixture.HGXInline(true), ModeVirtHost, false},
		{"no ATS", fixture.HGXInline(false), ModeBareMetal, false},
		{"NICs disagree", mixed, "", true},
		{"not read", fixture.NonRoot(fixture.HGXInline(true)), "", true},
		{"Data Direct", fixture.GB300DataDirect(), ModeBareMetal, false},
		{"no ConnectX NIC", fixture.DGXH100Like(), ModeBareMetal, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := load(t, testsupport.Root(t, tc.m))
			mode, why, err := DetectMode(n.Topology.Devices, FindShapes(n.Topology))
			if mode != tc.want || (err != nil) != tc.err || (err != nil && !errors.Is(err, ErrModeUnknown)) || (err == nil && why == "") {
				t.Errorf("mode %q (%s), err %v; want %q, error %v", mode, why, err, tc.want, tc.err)
			}
		})
	}
}
