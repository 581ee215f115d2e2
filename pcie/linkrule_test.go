package pcie

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLinkBelowBothEnds(t *testing.T) {
	dev := func(cur, max Link, parentMax *Link) *Device {
		d := &Device{Record: Record{CurrentLink: cur, MaxLink: max}}
		if parentMax != nil {
			d.Parent = &Device{Record: Record{MaxLink: *parentMax, CurrentLink: cur}}
		}
		return d
	}
	g5x16, g4x16, g5x8, g3x16 := Link{5, 16}, Link{4, 16}, Link{5, 8}, Link{3, 16}
	for _, tt := range []struct {
		name                     string
		d                        *Device
		ok                       bool
		best                     Link
		speed, width, portLimits bool
	}{
		{"full", dev(g5x16, g5x16, &g5x16), true, g5x16, false, false, false},
		{"slot caps speed: not below both ends", dev(g4x16, g5x16, &g4x16), true, g4x16, false, false, true},
		{"width lost", dev(g5x8, g5x16, &g5x16), true, g5x16, false, true, false},
		{"speed lost", dev(g3x16, g5x16, &g5x16), true, g5x16, true, false, false},
		{"root bus: own maximum", dev(g4x16, g5x16, nil), true, g5x16, true, false, false},
		{"port maximum unknown, at own maximum", dev(g5x16, g5x16, &Link{}), true, g5x16, false, false, false},
		{"port maximum unknown, below own maximum", dev(g4x16, g5x16, &Link{}), false, Link{}, false, false, false},
		{"current unknown", dev(Link{}, g5x16, &g5x16), false, Link{}, false, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, ok := LinkBelowBothEnds(tt.d)
			got := []any{ok, b.Best, b.SpeedBelow(), b.WidthBelow(), b.PortLimits(), b.Below()}
			want := []any{tt.ok, tt.best, tt.speed, tt.width, tt.portLimits, tt.speed || tt.width}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("ok, best, speed, width, port limits, below (-want +got):\n%s", diff)
			}
		})
	}
}
