package procfs

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

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

func TestParseCPUInfo(t *testing.T) {
	amd := "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n" +
		"model name\t: AMD EPYC 9654 96-Core Processor\nflags\t\t: fpu vme de sse2\n\n" +
		"processor\t: 1\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nflags\t\t: fpu\n\n"
	arm := "processor\t: 0\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd evtstrm aes\nCPU implementer\t: 0x41\n\n" +
		"processor\t: 1\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd\n\n"
	tests := []struct {
		name    string
		in      string
		want    CPUInfo
		wantErr bool
	}{
		{"AMD Zen 4", amd, CPUInfo{VendorID: "AuthenticAMD", Family: 25, Model: 17,
			ModelName: "AMD EPYC 9654 96-Core Processor", Flags: []string{"fpu", "vme", "de", "sse2"}, CPUs: 2}, false},
		{"arm64", arm, CPUInfo{Flags: []string{"fp", "asimd", "evtstrm", "aes"}, CPUs: 2}, false},
		{"bad family", "processor\t: 0\ncpu family\t: six\n", CPUInfo{}, true},
		{"no processor", "vendor_id\t: GenuineIntel\n", CPUInfo{}, true},
		{"empty", "", CPUInfo{}, true},
	}
	for _, tt := range tests {
		got, err := parseCPUInfo([]byte(tt.in))
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: err = %v, want error %t", tt.name, err, tt.wantErr)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestCPUInfoH200(t *testing.T) {
	fsys := h200(t)
	c, err := fsys.CPUInfo()
	if err != nil {
		t.Fatal(err)
	}
	if c.VendorID != "GenuineIntel" || c.Family != 6 || c.Model != 207 || c.ModelName != "Intel(R) Xeon(R) Processor" ||
		c.CPUs != 32 || !c.Hypervisor() || !c.HasFlag("avx512f") {
		t.Errorf("CPUInfo = %q family %d model %d %q, %d CPUs, hypervisor %t",
			c.VendorID, c.Family, c.Model, c.ModelName, c.CPUs, c.Hypervisor())
	}
}
