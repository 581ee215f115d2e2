package kversion

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    Version
		wantErr bool
	}{
		{in: "6.12.117-amd64", want: Version{"6.12.117-amd64", 6, 12, 117}},
		{in: "6.1", want: Version{"6.1", 6, 1, 0}},
		{in: "7.3.0-rc1", want: Version{"7.3.0-rc1", 7, 3, 0}},
		{in: "5.15.0-1045-nvidia", want: Version{"5.15.0-1045-nvidia", 5, 15, 0}},
		{in: "6.2-rc3", want: Version{"6.2-rc3", 6, 2, 0}},
		{in: "6.12-rc3+", want: Version{"6.12-rc3+", 6, 12, 0}},
		{in: "6.18.44-fc-v669", want: Version{"6.18.44-fc-v669", 6, 18, 44}},
		{in: "4.18.0-553.el8_10.x86_64", want: Version{"4.18.0-553.el8_10.x86_64", 4, 18, 0}},
		{in: "4.9.337", want: Version{"4.9.337", 4, 9, 337}},
		{in: "6.1.", want: Version{"6.1.", 6, 1, 0}},
		{in: "6.1.x", want: Version{"6.1.x", 6, 1, 0}},
		{in: "6", wantErr: true},
		{in: "6.", wantErr: true},
		{in: "", wantErr: true},
		{in: "x.1", wantErr: true},
		{in: "v6.1", wantErr: true},
		{in: "6.x", wantErr: true},
		{in: "0.1", wantErr: true},
		{in: "100.1", wantErr: true},
		{in: "6.100", wantErr: true},
		{in: "6a.1", wantErr: true},
		{in: "6.1.1234567890", wantErr: true},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("Parse(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			continue
		}
		if err != nil && !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) error = %v, want one wrapping ErrSyntax", tt.in, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Parse(%q) mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestCompare(t *testing.T) {
	tests := []struct {
		v, w Version
		want int
	}{
		{Version{Major: 6, Minor: 1}, Version{Major: 6, Minor: 1}, 0},
		{Version{Major: 6, Minor: 1}, Version{Major: 6, Minor: 12}, -1},
		{Version{Major: 7, Minor: 0}, Version{Major: 6, Minor: 12}, 1},
		{Version{Major: 6, Minor: 1, Patch: 5}, Version{Major: 6, Minor: 1}, 1},
		{Version{Release: "6.1-x", Major: 6, Minor: 1}, Version{Major: 6, Minor: 1}, 0},
		{Version{}, Version{Major: 4, Minor: 20}, -1},
	}
	for _, tt := range tests {
		if got := tt.v.Compare(tt.w); got != tt.want {
			t.Errorf("%v.Compare(%v) = %d; want %d", tt.v, tt.w, got, tt.want)
		}
	}
}

func TestAtLeast(t *testing.T) {
	v := Version{Major: 6, Minor: 2, Patch: 9}
	for _, tt := range []struct {
		major, minor int
		want         bool
	}{{6, 2, true}, {6, 1, true}, {5, 19, true}, {6, 3, false}, {7, 0, false}} {
		if got := v.AtLeast(tt.major, tt.minor); got != tt.want {
			t.Errorf("%v.AtLeast(%d, %d) = %v; want %v", v, tt.major, tt.minor, got, tt.want)
		}
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		v    Version
		want string
	}{
		{Version{}, "unknown"},
		{Version{Major: 6, Minor: 12}, "6.12"},
		{Version{Release: "6.12.3-x", Major: 6, Minor: 12, Patch: 3}, "6.12.3"},
		{Version{Release: "6.12.3-x", Major: 6, Minor: 12, Patch: 3}.Series(), "6.12"},
	}
	for _, tt := range tests {
		if got := tt.v.String(); got != tt.want {
			t.Errorf("%#v.String() = %q; want %q", tt.v, got, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"6.12.117-amd64", "6.1", "7.3.0-rc1", "4.19", "1.", ".1", "99.99", "6.1.0.1", "4.9.337"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Parse(s)
		if err != nil {
			return
		}
		if v.Release != s || v.Major < 1 || v.Major > 99 || v.Minor < 0 || v.Minor > 99 || v.Patch < 0 {
			t.Fatalf("Parse(%q) = %#v out of bounds", s, v)
		}
		back, err := Parse(v.String())
		if err != nil || back.Compare(v) != 0 || back.String() != v.String() {
			t.Fatalf("round trip of %q: %v -> %q -> %v, %v", s, v, v.String(), back, err)
		}
	})
}
