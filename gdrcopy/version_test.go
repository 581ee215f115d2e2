package gdrcopy

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/gdrcopy/internal/gdrdrv"
)

// The public constants repeat values of the raw ABI.
func TestPublicConstantsMatchABI(t *testing.T) {
	got := []uint32{uint32(APIVersion), uint32(MinimumDriverVersion),
		uint32(MappingNone), uint32(MappingWC), uint32(MappingCaching), uint32(MappingDevice),
		uint32(PinDefault), uint32(PinForcePCIe)}
	want := []uint32{gdrdrv.APIVersion, gdrdrv.MinimumDriverVersion,
		gdrdrv.MRNone, gdrdrv.MRWC, gdrdrv.MRCaching, gdrdrv.MRDevice,
		gdrdrv.PinFlagDefault, gdrdrv.PinFlagForcePCIe}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-gdrdrv +gdrcopy):\n%s", diff)
	}
}

func TestParseVersion(t *testing.T) {
	tests := []struct {
		in      string
		want    Version
		wantErr bool
	}{
		{"2.6", 0x00020006, false},
		{"2.0", 0x00020000, false},
		{"1.4", 0x00010004, false},
		{"65535.65535", 0xFFFFFFFF, false},
		{"02.06", 0x00020006, false},
		{"2", 0, true},
		{"2.", 0, true},
		{".6", 0, true},
		{"2.6.1", 0, true},
		{"v2.6", 0, true},
		{"2.6\n", 0, true},
		{" 2.6", 0, true},
		{"+2.6", 0, true},
		{"2.-6", 0, true},
		{"65536.0", 0, true},
		{"0x2.6", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseVersion(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseVersion(%q) error = %v, want error %t", tt.in, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("ParseVersion(%q) = %#x, want %#x", tt.in, uint32(got), uint32(tt.want))
			}
		})
	}
}

func TestVersionParts(t *testing.T) {
	v := NewVersion(2, 6)
	got := []any{uint32(v), v.Major(), v.Minor(), v.String(), APIVersion.String(), MinimumDriverVersion.String()}
	want := []any{uint32(0x00020006), uint16(2), uint16(6), "2.6", "2.6", "2.0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// checkVersions mirrors gdr_open_gdrdrv_internal.
func TestCheckVersions(t *testing.T) {
	tests := []struct {
		driver, minAPI Version
		ok             bool
	}{
		{NewVersion(2, 6), NewVersion(2, 0), true},
		{NewVersion(2, 0), NewVersion(2, 0), true},
		{NewVersion(2, 9), NewVersion(2, 6), true},
		{NewVersion(1, 9), NewVersion(1, 0), false},
		{NewVersion(0, 0), NewVersion(0, 0), false},
		{NewVersion(2, 7), NewVersion(2, 7), false},
		{NewVersion(3, 0), NewVersion(3, 0), false},
	}
	for _, tt := range tests {
		t.Run(tt.driver.String()+"/"+tt.minAPI.String(), func(t *testing.T) {
			err := checkVersions(tt.driver, tt.minAPI)
			if (err == nil) != tt.ok {
				t.Fatalf("checkVersions = %v, want success %t", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrNotSupported) {
				t.Errorf("err = %v, want ErrNotSupported", err)
			}
		})
	}
}

func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"2.6", "2.0", "65535.65535", "1.", "02.06", "2.6.1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVersion(s)
		if err != nil {
			return
		}
		again, err := ParseVersion(v.String())
		if err != nil || again != v {
			t.Fatalf("ParseVersion(%q) = %s, which reparses as %#x, %v", s, v, uint32(again), err)
		}
		if NewVersion(v.Major(), v.Minor()) != v {
			t.Fatalf("NewVersion(Major, Minor) of %#x differs", uint32(v))
		}
	})
}
