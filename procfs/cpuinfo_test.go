package procfs

import "testing"

func TestCPUInfoArm64(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    CPUInfo
		want bool
	}{
		{"Grace", CPUInfo{Flags: []string{"fp", "asimd", "sve2"}}, true},
		{"x86", CPUInfo{VendorID: "GenuineIntel", Flags: []string{"fpu", "sse2"}}, false},
		{"no features", CPUInfo{}, false},
	} {
		if got := tt.c.Arm64(); got != tt.want {
			t.Errorf("%s: Arm64() = %t, want %t", tt.name, got, tt.want)
		}
	}
}
