package procfs

import (
	"testing"

	"github.com/p2pkit/p2pkit/kversion"
)

func TestParseProcVersion(t *testing.T) {
	tests := []struct {
		in      string
		want    kversion.Version
		wantErr bool
	}{
		{"Linux version 6.18.44-fc-v669 (builder@sandboxing) (gcc (GCC) 15.3.0) #1 SMP\n",
			kversion.Version{Release: "6.18.44-fc-v669", Major: 6, Minor: 18, Patch: 44}, false},
		{"Linux version 6.1.0-28-amd64 (debian-kernel@lists.debian.org) #1 SMP\n",
			kversion.Version{Release: "6.1.0-28-amd64", Major: 6, Minor: 1, Patch: 0}, false},
		{"Linux version 6.12-rc3+ (x@y) #1\n", kversion.Version{Release: "6.12-rc3+", Major: 6, Minor: 12, Patch: 0}, false},
		{"Linux version 4.18.0-553.el8_10.x86_64 (mockbuild@) #1\n", kversion.Version{Release: "4.18.0-553.el8_10.x86_64", Major: 4, Minor: 18, Patch: 0}, false},
		{"Linux version 6 (x) #1\n", kversion.Version{}, true},
		{"Linux version v6.1 (x) #1\n", kversion.Version{}, true},
		{"FreeBSD 14.0\n", kversion.Version{}, true},
		{"", kversion.Version{}, true},
	}
	for _, tt := range tests {
		got, err := parseProcVersion([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseProcVersion(%q) = %+v, %v; want %+v, error %t", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}
