package gpu

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFactsJSONRoundTrip reads back Facts written as JSON, as a snapshot records
// them: marshalling what was read gives the same document, labels and codes included.
func TestFactsJSONRoundTrip(t *testing.T) {
	want, err := os.ReadFile("testdata/h200-2gpu-vm/facts.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var f Facts
	if err := json.Unmarshal(want, &f); err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)+"\n"); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	for _, bad := range []string{`"PHX"`, `"level(x)"`, `"level(7)junk"`} {
		var l TopologyLevel
		if err := json.Unmarshal([]byte(bad), &l); err == nil {
			t.Errorf("topology level %s read as %v", bad, l)
		}
	}
	var l TopologyLevel
	if err := json.Unmarshal([]byte(`"level(7)"`), &l); err != nil || l != 7 {
		t.Errorf("level(7) = %v, %v", l, err)
	}
	var s P2PStatus
	if err := json.Unmarshal([]byte(`"CNS"`), &s); err != nil || s != P2PChipsetNotSupported {
		t.Errorf("CNS = %v, %v", s, err)
	}
	if err := json.Unmarshal([]byte(`"XX"`), &s); err == nil {
		t.Errorf("XX read as %v", s)
	}
}

// FuzzUnmarshalText checks the labels and codes read back: whatever parses writes
// back as the same text, and nothing panics.
func FuzzUnmarshalText(f *testing.F) {
	for _, s := range []string{"PHB", "NV", "level(7)", "level(10)", "level(-1)", "OK", "U", "CNS", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var l TopologyLevel
		if l.UnmarshalText([]byte(s)) == nil {
			if b, _ := l.MarshalText(); string(b) != s {
				t.Errorf("topology level %q reads as %v, writes as %q", s, int(l), b)
			}
		}
		var p P2PStatus
		if p.UnmarshalText([]byte(s)) == nil {
			if b, _ := p.MarshalText(); string(b) != s {
				t.Errorf("P2P status %q reads as %v, writes as %q", s, int(p), b)
			}
		}
	})
}
