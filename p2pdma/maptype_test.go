package p2pdma

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/p2pkit/p2pkit/kversion"
	"github.com/p2pkit/p2pkit/pcie"
)

func TestMapTypeText(t *testing.T) {
	for _, m := range []MapType{Unknown, NotSupported, BusAddr, ThruHostBridge} {
		b, err := m.MarshalText()
		if err != nil {
			t.Fatalf("%v.MarshalText: %v", m, err)
		}
		if string(b) != m.String() {
			t.Errorf("MarshalText = %q, String = %q", b, m.String())
		}
		var back MapType
		if err := back.UnmarshalText(b); err != nil || back != m {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", b, back, err, m)
		}
	}
	got, err := json.Marshal(map[string]MapType{"a": BusAddr, "b": ThruHostBridge, "c": NotSupported, "d": Unknown})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":"bus-addr","b":"thru-host-bridge","c":"not-supported","d":"unknown"}`
	if string(got) != want {
		t.Errorf("JSON = %s; want %s", got, want)
	}
	if _, err := MapType(1).MarshalText(); err == nil {
		t.Error("MarshalText of MapType(1) (the kernel's NONE) succeeded; want an error")
	}
	var m MapType
	if err := m.UnmarshalText([]byte("none")); err == nil {
		t.Error(`UnmarshalText("none") succeeded; want an error`)
	}
}

func TestWhitelistFor(t *testing.T) {
	ids := func(v kversion.Version) []string {
		var out []string
		for _, e := range whitelistFor(v) {
			out = append(out, e.String())
		}
		return out
	}
	base := []string{"8086:3c00", "8086:3c01", "8086:2f00", "8086:2f01", "8086:2030", "8086:2031",
		"8086:2032", "8086:2033", "8086:2020", "8086:09a2"}
	accel := []string{"8086:0b25", "8086:0cfe", "8086:11fb", "8086:1212", "8086:1216", "8086:4940",
		"8086:4942", "8086:4944", "8086:4946", "8086:4948"}
	next := []string{"10de:2f95", "10de:2f96", "10de:2f97", "10de:2f98", "1d17:1003", "1d17:1005",
		"1d17:1006", "1d17:1007", "1d17:1008"}
	cat := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	tests := []struct {
		v    kversion.Version
		want []string
	}{
		{kversion.Version{}, base},
		{kversion.Version{Major: 5, Minor: 9}, base[:9]}, // Ice Lake's 09a2 came in 5.18
		{kversion.Version{Major: 5, Minor: 17}, base[:9]},
		{kversion.Version{Major: 5, Minor: 18}, base},
		{kversion.Version{Major: 6, Minor: 1}, base},
		{kversion.Version{Major: 6, Minor: 12}, base},
		{kversion.Version{Major: 7, Minor: 1}, cat(base, []string{"1ae0:*"})}, // accelerators only via 7.1.y backport
		{kversion.Version{Major: 7, Minor: 2}, cat(base, accel, []string{"1ae0:*"})},
		{kversion.Version{Major: 7, Minor: 4}, cat(base, accel, []string{"1ae0:*"}, next)},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, ids(tt.v)); diff != "" {
			t.Errorf("whitelistFor(%v) mismatch (-want +got):\n%s", tt.v, diff)
		}
	}
}

// TestVerdictJSON checks the field names and forms of the pairs JSON contract
// (schema/pairs.v1.json), which the renderer extends with path_type.
func TestVerdictJSON(t *testing.T) {
	s := plainSwitch.build(t)
	c := NewCalculator(s.t, intel)
	got, err := json.Marshal(c.Calc(s.ep0, s.ep1))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"provider":"0000:03:00.0","client":"0000:04:00.0","map_type":"bus-addr","distance":4,` +
		`"acs_redirect":[],"reason":"client and provider share upstream bridge 0000:01:00.0 and no function ` +
		`on the path between them has ACS redirect set, so DMA uses PCI bus addresses"}`
	if string(got) != want {
		t.Errorf("JSON:\n got %s\nwant %s", got, want)
	}
	r := plainSwitch
	r.dsp0ACS = int(pcie.ACSRequestRedirect)
	r = r.build(t)
	got, err = json.Marshal(NewCalculator(r.t, intel).Calc(r.ep0, r.ep1))
	if err != nil {
		t.Fatal(err)
	}
	for _, frag := range []string{`"map_type":"not-supported"`, `"acs_redirect":["0000:02:00.0"]`,
		`"fix":{"kernel_param":"pci=disable_acs_redir=0000:02:00.0","setpci":["setpci -s 0000:02:00.0 ECAP_ACS+6.w=0000:002c"]}`} {
		if !strings.Contains(string(got), frag) {
			t.Errorf("JSON %s lacks %s", got, frag)
		}
	}
}
