package render

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pcie"
)

// TestPairsText checks the table p2pcheck pairs prints: the header, one
// aligned row per pair in the order given, the bridges with ACS redirect, the
// first clause of the reason for a pair that does not map bus addresses (none
// for one that does), escaped, and color only when asked.
func TestPairsText(t *testing.T) {
	a, b, sw := pcie.Address{Bus: 3}, pcie.Address{Bus: 4}, pcie.Address{Bus: 2}
	const header = "PROVIDER      CLIENT        MAP TYPE         DIST PATH  ACS REDIRECT / WHY"
	tests := []struct {
		name  string
		pairs []Pair
		want  []string // the lines after the header
	}{
		{"no pairs", nil, nil},
		{"bus address", []Pair{
			{Verdict: p2pdma.Verdict{Provider: a, Client: b, MapType: p2pdma.BusAddr, Distance: 4, Reason: "below a common bridge: no ACS"}, PathType: "PIX"},
		}, []string{"0000:03:00.0  0000:04:00.0  bus-addr            4 PIX   "}},
		{"ACS redirect", []Pair{
			{Verdict: p2pdma.Verdict{Provider: b, Client: a, MapType: p2pdma.ThruHostBridge, Distance: 4, ACSRedirect: []pcie.Address{sw}, Reason: "ACS redirect: set"}, PathType: "PIX"},
		}, []string{"0000:04:00.0  0000:03:00.0  thru-host-bridge    4 PIX   [0000:02:00.0]"}},
		{"not supported, first clause, in order", []Pair{
			{Verdict: p2pdma.Verdict{Provider: a, Client: b, MapType: p2pdma.NotSupported, Distance: 12, Reason: "no common bridge; host bridge not whitelisted: x"}, PathType: "SYS"},
			{Verdict: p2pdma.Verdict{Provider: b, Client: a, MapType: p2pdma.Unknown, Distance: 4, Reason: "the verdict depends on ACS Control"}, PathType: "PIX"},
		}, []string{
			"0000:03:00.0  0000:04:00.0  not-supported      12 SYS   no common bridge",
			"0000:04:00.0  0000:03:00.0  unknown             4 PIX   the verdict depends on ACS Control",
		}},
		{"terminal controls in the reason", []Pair{
			{Verdict: p2pdma.Verdict{Provider: a, Client: b, MapType: p2pdma.NotSupported, Reason: "bad\x1b[2J name"}, PathType: "SYS"},
		}, []string{"0000:03:00.0  0000:04:00.0  not-supported       0 SYS   " + Escape("bad\x1b[2J name")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var plain, color bytes.Buffer
			if err := PairsText(&plain, seqOf(tt.pairs...), Style{}); err != nil {
				t.Fatal(err)
			}
			want := append([]string{header}, tt.want...)
			if diff := cmp.Diff(want, strings.Split(strings.TrimSuffix(plain.String(), "\n"), "\n")); diff != "" {
				t.Errorf("PairsText (-want +got):\n%s", diff)
			}
			if err := PairsText(&color, seqOf(tt.pairs...), Style{Color: true}); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(plain.String(), "\x1b") || (len(tt.pairs) > 0 && !strings.Contains(color.String(), "\x1b[")) {
				t.Errorf("escape sequences: want them in the colored table only")
			}
		})
	}
}
