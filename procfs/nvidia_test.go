package procfs

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseNVIDIAVersion(t *testing.T) {
	tests := []struct {
		in      string
		want    NVIDIADriver
		wantErr bool
	}{
		{"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \nGCC version:  gcc version 15.3.0 (GCC) \n",
			NVIDIADriver{Version: "580.159.04", Major: 580, Open: true,
				Line: "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)"}, false},
		{"NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n",
			NVIDIADriver{Version: "535.104.05", Major: 535,
				Line: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023"}, false},
		{"NVRM version: NVIDIA UNIX aarch64 Kernel Module  177.80  Wed Oct  1 14:43:46 PDT 2008\n",
			NVIDIADriver{Version: "177.80", Major: 177,
				Line: "NVRM version: NVIDIA UNIX aarch64 Kernel Module  177.80  Wed Oct  1 14:43:46 PDT 2008"}, false},
		{"NVRM version: NVIDIA UNIX Kernel Module\n", NVIDIADriver{}, true},
		{"GCC version: 12\n", NVIDIADriver{}, true},
	}
	for _, tt := range tests {
		got, err := parseNVIDIAVersion([]byte(tt.in))
		if (err != nil) != tt.wantErr {
			t.Errorf("parseNVIDIAVersion(%q) err = %v, want error %t", tt.in, err, tt.wantErr)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("parseNVIDIAVersion(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}
