package pcie

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseAddress(t *testing.T) {
	tests := []struct {
		in    string
		want  Address
		canon string
	}{
		{"0000:00:00.0", Address{}, "0000:00:00.0"},
		{"0000:3b:1f.7", Address{0, 0x3b, 0x1f, 7}, "0000:3b:1f.7"},
		{"00:02.1", Address{0, 0, 2, 1}, "0000:00:02.1"},
		{"ffff:ff:1f.7", Address{0xffff, 0xff, 0x1f, 7}, "ffff:ff:1f.7"},
		{"10000:e1:00.0", Address{0x10000, 0xe1, 0, 0}, "10000:e1:00.0"}, // Intel VMD
		{"FFFFFFFF:AB:0C.3", Address{0xffffffff, 0xab, 0x0c, 3}, "ffffffff:ab:0c.3"},
		{"1:2:3.4", Address{1, 2, 3, 4}, "0001:02:03.4"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseAddress(tt.in)
			if err != nil {
				t.Fatalf("ParseAddress: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseAddress mismatch (-want +got):\n%s", diff)
			}
			if s := got.String(); s != tt.canon {
				t.Errorf("String = %q, want %q", s, tt.canon)
			}
			back, err := ParseAddress(got.String())
			if err != nil || back != got {
				t.Errorf("round trip: %v, %v", back, err)
			}
			var u Address
			text, _ := got.MarshalText()
			if err := u.UnmarshalText(text); err != nil || u != got {
				t.Errorf("text round trip: %v, %v", u, err)
			}
		})
	}
}

func TestParseAddressErrors(t *testing.T) {
	for _, in := range []string{
		"", "0000:00:00", "0000:00:00.", "0000:00:20.0", "0000:00:00.8", "0000:100:00.0",
		"000000000:00:00.0", ":00:00.0", "0000::00.0", "0000:00:.0", "g000:00:00.0",
		"0000:00:00.0.0", "0000:00:00:0", "0000:00:00.00", "0000:0x:00.0", "0000:00:00.0 ",
		"a:b:c:d.0",
	} {
		t.Run(in, func(t *testing.T) {
			if a, err := ParseAddress(in); !errors.Is(err, ErrInvalidAddress) {
				t.Errorf("ParseAddress(%q) = %v, %v; want ErrInvalidAddress", in, a, err)
			}
		})
	}
	var a Address
	if err := a.UnmarshalText([]byte("nope")); !errors.Is(err, ErrInvalidAddress) {
		t.Errorf("UnmarshalText error = %v", err)
	}
}

func TestAddressCompare(t *testing.T) {
	ordered := []Address{
		{0, 0, 0, 0}, {0, 0, 0, 1}, {0, 0, 1, 0}, {0, 1, 0, 0}, {0, 0xff, 0x1f, 7}, {1, 0, 0, 0}, {0x10000, 0, 0, 0},
	}
	for i, a := range ordered {
		for j, b := range ordered {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := a.Compare(b); got != want {
				t.Errorf("%s.Compare(%s) = %d, want %d", a, b, got, want)
			}
		}
	}
	if got := (Address{Device: 0x1f, Function: 7}).DevFn(); got != 0xff {
		t.Errorf("DevFn = %#x, want 0xff", got)
	}
}

func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{"0000:00:00.0", "00:1f.7", "10000:e1:00.0", "ffffffff:ff:1f.7", "0:0:0.0", "0000:00:20.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAddress(s)
		if err != nil {
			return
		}
		c := a.String()
		b, err := ParseAddress(c)
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", c, s, err)
		}
		if a != b {
			t.Fatalf("%q -> %v -> %q -> %v", s, a, c, b)
		}
		if a.Device > 31 || a.Function > 7 {
			t.Fatalf("%q parsed out of range: %v", s, a)
		}
	})
}
