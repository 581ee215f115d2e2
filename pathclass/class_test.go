package pathclass

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    Result
		wantErr bool
	}{
		{in: "X", want: Result{Class: X}},
		{in: "LOC", want: Result{Class: X}},
		{in: " PIX ", want: Result{Class: PIX}},
		{in: "PXB", want: Result{Class: PXB}},
		{in: "PHB", want: Result{Class: PHB}},
		{in: "NODE", want: Result{Class: NODE}},
		{in: "SYS", want: Result{Class: SYS}},
		{in: "NV18", want: Result{Class: NV, NVLinks: 18}},
		{in: "NVL", want: Result{Class: NV}},
		{in: "unknown", want: Result{}},
		{in: "NV", wantErr: true},
		{in: "NV0", wantErr: true},
		{in: "NVx", wantErr: true},
		{in: "PXN", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("Parse(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Parse(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"X", "PIX", "NV12", "NV", "LOC", "SYS", "NV-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		if err != nil {
			return
		}
		b, err := r.MarshalText()
		if err != nil {
			t.Fatalf("MarshalText(%+v): %v", r, err)
		}
		if r.Class == NV && r.NVLinks == 0 {
			return // "NVL" has no count to print
		}
		back, err := Parse(string(b))
		if err != nil || back != r {
			t.Fatalf("round trip %q -> %+v -> %q -> %+v, %v", s, r, b, back, err)
		}
	})
}

func TestNVMLLevels(t *testing.T) {
	for _, tt := range []struct {
		level NVMLLevel
		class Class
	}{
		{NVMLSingle, PIX}, {NVMLMultiple, PXB}, {NVMLHostBridge, PHB}, {NVMLNode, NODE}, {NVMLSystem, SYS},
	} {
		c, ok := tt.level.Class()
		if !ok || c != tt.class {
			t.Errorf("NVMLLevel(%d).Class() = %v, %v; want %v", tt.level, c, ok, tt.class)
		}
		l, ok := tt.class.NVMLLevel()
		if !ok || l != tt.level {
			t.Errorf("%v.NVMLLevel() = %d, %v; want %d", tt.class, l, ok, tt.level)
		}
	}
	if c, ok := NVMLInternal.Class(); !ok || c != PIX {
		t.Errorf("INTERNAL maps to %v, %v; want PIX", c, ok)
	}
	if _, ok := NVMLLevel(35).Class(); ok {
		t.Error("level 35 accepted")
	}
	for _, c := range []Class{Unknown, X, NV} {
		if _, ok := c.NVMLLevel(); ok {
			t.Errorf("%v has an NVML level", c)
		}
	}
}

func TestNCCLDefaults(t *testing.T) {
	all := []Class{Unknown, X, NV, PIX, PXB, PHB, NODE, SYS}
	var gdr []Class
	for _, c := range all {
		if NCCLGDRByDefault(c) {
			gdr = append(gdr, c)
		}
	}
	if diff := cmp.Diff([]Class{PIX, PXB}, gdr); diff != "" {
		t.Errorf("GDR by default (-want +got):\n%s", diff)
	}
	p2p := func(vendor string, gpus int) []Class {
		var out []Class
		for _, c := range all {
			if ncclP2PByDefault(c, vendor, gpus) {
				out = append(out, c)
			}
		}
		return out
	}
	if diff := cmp.Diff([]Class{X, NV, PIX, PXB}, p2p("GenuineIntel", 2)); diff != "" {
		t.Errorf("P2P on Intel (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Class{X, NV, PIX, PXB, PHB, NODE, SYS}, p2p("AuthenticAMD", 2)); diff != "" {
		t.Errorf("P2P on AMD with 2 GPUs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Class{X, NV, PIX, PXB}, p2p("AuthenticAMD", 8)); diff != "" {
		t.Errorf("P2P on AMD with 8 GPUs (-want +got):\n%s", diff)
	}
}

func TestResultJSON(t *testing.T) {
	got, err := json.Marshal([]Result{{Class: PIX}, {Class: NV, NVLinks: 18}, {Class: X}, {}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `["PIX","NV18","X","unknown"]`; string(got) != want {
		t.Errorf("JSON = %s; want %s", got, want)
	}
	var back []Result
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Result{{Class: PIX}, {Class: NV, NVLinks: 18}, {Class: X}, {}}, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if _, err := (Result{Class: 99}).MarshalText(); err == nil {
		t.Error("MarshalText of an invalid class succeeded")
	}
}
