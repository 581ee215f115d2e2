package procfs

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/p2pkit/p2pkit/kversion"
)

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

func TestParseCmdline(t *testing.T) {
	in := `BOOT_IMAGE=/vmlinuz-6.1.0 root=UUID=abc ro quiet "dyndbg=file p2pdma.c +p" ` +
		`acpi_osi="Windows 2020" pci=noats,disable_acs_redir=0000:00:01.0;0000:00:02.0 ` +
		`intel-iommu=on,sm_on iommu=pt amd_iommu=off pci=config_acs=10x@pci:0:0 nosmt -- single init=x` + "\n"
	c := parseCmdline([]byte(in))
	want := []Param{
		{"BOOT_IMAGE", "/vmlinuz-6.1.0", true},
		{"root", "UUID=abc", true},
		{"ro", "", false},
		{"quiet", "", false},
		{"dyndbg", "file p2pdma.c +p", true},
		{"acpi_osi", "Windows 2020", true},
		{"pci", "noats,disable_acs_redir=0000:00:01.0;0000:00:02.0", true},
		{"intel-iommu", "on,sm_on", true},
		{"iommu", "pt", true},
		{"amd_iommu", "off", true},
		{"pci", "config_acs=10x@pci:0:0", true},
		{"nosmt", "", false},
	}
	if diff := cmp.Diff(want, c.Params); diff != "" {
		t.Errorf("params (-want +got):\n%s", diff)
	}
	if c.Raw != strings.TrimSuffix(in, "\n") {
		t.Errorf("Raw = %q", c.Raw)
	}
	wantPCI := []Param{
		{"noats", "", false},
		{"disable_acs_redir", "0000:00:01.0;0000:00:02.0", true},
		{"config_acs", "10x@pci:0:0", true},
	}
	if diff := cmp.Diff(wantPCI, c.PCI()); diff != "" {
		t.Errorf("PCI() (-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		lookup func(string) (string, bool)
		name   string
		want   string
		ok     bool
	}{
		{c.Lookup, "intel_iommu", "on,sm_on", true},
		{c.Lookup, "iommu", "pt", true},
		{c.Lookup, "amd-iommu", "off", true},
		{c.Lookup, "init", "", false},
		{c.PCIOption, "disable_acs_redir", "0000:00:01.0;0000:00:02.0", true},
		{c.PCIOption, "noats", "", true},
		{c.PCIOption, "realloc", "", false},
	} {
		if got, ok := tt.lookup(tt.name); got != tt.want || ok != tt.ok {
			t.Errorf("lookup %q = %q, %t; want %q, %t", tt.name, got, ok, tt.want, tt.ok)
		}
	}
	if got := parseCmdline(nil); len(got.Params) != 0 || got.Raw != "" {
		t.Errorf("empty command line = %+v", got)
	}
}

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

func TestParseModules(t *testing.T) {
	in := "nvidia_uvm 1830912 0 - Live 0xffffffffc080c000 (O)\n" +
		"nvidia 14299136 2 nvidia_uvm,nvidia_peermem, Live 0xffffffffc0400000 (POE)\n" +
		"gdrdrv 28672 - - Loading 0x0000000000000000\n"
	want := []Module{
		{Name: "nvidia_uvm", Size: 1830912, RefCount: 0, State: "Live", Taints: "O"},
		{Name: "nvidia", Size: 14299136, RefCount: 2, UsedBy: []string{"nvidia_uvm", "nvidia_peermem"}, State: "Live", Taints: "POE"},
		{Name: "gdrdrv", Size: 28672, RefCount: -1, State: "Loading"},
	}
	got, err := parseModules([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{"nvidia 1 2\n", "nvidia x 0 - Live 0x0\n", "nvidia 1 -3 - Live 0x0\n"} {
		if _, err := parseModules([]byte(bad)); err == nil {
			t.Errorf("parseModules(%q) succeeded", bad)
		}
	}
	if got, err := parseModules(nil); err != nil || got == nil || len(got) != 0 {
		t.Errorf("no modules = %v, %v; want empty, not nil", got, err)
	}
}

func TestParseCharDevices(t *testing.T) {
	in := "Character devices:\n  1 mem\n195 nvidia\n195 nvidiactl\n231 infiniband_verbs\n" +
		"244 infiniband_verbs\n509 gdrdrv\n\nBlock devices:\n  7 loop\n259 blkext\n"
	got, err := parseCharDevices([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []CharDevice{{1, "mem"}, {195, "nvidia"}, {195, "nvidiactl"}, {231, "infiniband_verbs"},
		{244, "infiniband_verbs"}, {509, "gdrdrv"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for name, want := range map[string]uint32{"gdrdrv": 509, "infiniband_verbs": 231, "nvidia": 195} {
		if m, ok := LookupMajor(got, name); !ok || m != want {
			t.Errorf("LookupMajor(%q) = %d, %t; want %d", name, m, ok, want)
		}
	}
	if _, ok := LookupMajor(got, "loop"); ok {
		t.Error("LookupMajor found a block device")
	}
	if _, err := parseCharDevices([]byte("Character devices:\nxx mem\n")); err == nil {
		t.Error("parseCharDevices accepted a bad major")
	}
}

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

func TestParseKeyValues(t *testing.T) {
	in := "Version: 2.5\nBuilt for NVIDIA driver flavor: opensource\nUse persistent mapping: yes\n" +
		"dbg_enabled: 0\ninfo_enabled: 1\ngarbage line\n"
	want := map[string]string{
		"Version": "2.5", "Built for NVIDIA driver flavor": "opensource",
		"Use persistent mapping": "yes", "dbg_enabled": "0", "info_enabled": "1",
	}
	if diff := cmp.Diff(want, parseKeyValues([]byte(in))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func gz(t testing.TB, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestKernelConfig(t *testing.T) {
	const version = "Linux version 6.1.0-28-amd64 (x@y) #1 SMP\n"
	const config = "#\n# Automatically generated file\nCONFIG_PCI=y\n# CONFIG_PCI_P2PDMA is not set\n" +
		"CONFIG_NVME_CORE=m\nCONFIG_LOCALVERSION=\"\"\n"
	tests := []struct {
		name       string
		entries    []entry
		wantSource string
		wantP2P    ConfigValue
		wantErr    bool
	}{
		{"proc config.gz", []entry{file("proc/config.gz", string(gz(t, "CONFIG_PCI_P2PDMA=y\n")))}, "/proc/config.gz", ConfigYes, false},
		{"boot config", []entry{file("proc/version", version), file("boot/config-6.1.0-28-amd64", config)},
			"/boot/config-6.1.0-28-amd64", ConfigNo, false},
		{"config.gz wins", []entry{file("proc/version", version), file("boot/config-6.1.0-28-amd64", config),
			file("proc/config.gz", string(gz(t, "CONFIG_PCI_P2PDMA=y\n")))}, "/proc/config.gz", ConfigYes, false},
		{"no config", []entry{file("proc/version", version)}, "", ConfigUnknown, false},
		{"nothing", []entry{directory("proc")}, "", ConfigUnknown, false},
		{"corrupt config.gz", []entry{file("proc/config.gz", "not gzip")}, "", ConfigUnknown, true},
	}
	for _, tt := range tests {
		dirFS, memFS := openBoth(t, tt.entries)
		for kind, fsys := range map[string]FS{"dir": dirFS, "snapshot": memFS} {
			k, err := fsys.KernelConfig()
			if (err != nil) != tt.wantErr || k.Source != tt.wantSource || k.Value("CONFIG_PCI_P2PDMA") != tt.wantP2P {
				t.Errorf("%s/%s: source %q P2PDMA %v err %v; want %q %v error %t", tt.name, kind,
					k.Source, k.Value("CONFIG_PCI_P2PDMA"), err, tt.wantSource, tt.wantP2P, tt.wantErr)
			}
		}
	}
	k := KernelConfig{Source: "/boot/config-x", Options: parseConfig([]byte(config))}
	for name, want := range map[string]ConfigValue{"CONFIG_PCI": ConfigYes, "CONFIG_NVME_CORE": ConfigModule,
		"CONFIG_PCI_P2PDMA": ConfigNo, "CONFIG_ABSENT": ConfigNo} {
		if got := k.Value(name); got != want {
			t.Errorf("Value(%q) = %v, want %v", name, got, want)
		}
	}
	if k.Options["CONFIG_LOCALVERSION"] != `""` {
		t.Errorf("CONFIG_LOCALVERSION = %q", k.Options["CONFIG_LOCALVERSION"])
	}
}

func FuzzParseProc(f *testing.F) {
	f.Add([]byte("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n\n"))
	f.Add([]byte("Linux version 6.1.0-28-amd64 (x) #1\n"))
	f.Add([]byte("nvidia 14299136 2 nvidia_uvm, Live 0xffffffffc0400000 (POE)\n"))
	f.Add([]byte("Character devices:\n195 nvidia\n\nBlock devices:\n7 loop\n"))
	f.Add([]byte("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build\n"))
	f.Add([]byte(`root=/dev/sda "a b" x="y z" pci=noats,config_acs=1@0:0.0 -- init`))
	f.Add([]byte("# CONFIG_PCI_P2PDMA is not set\nCONFIG_PCI=y\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, err := parseCPUInfo(b); err == nil && c.CPUs == 0 {
			t.Fatal("parseCPUInfo succeeded without a processor")
		}
		// Parameters are separated by blanks and each holds at least one other byte.
		c := parseCmdline(b)
		fields := 0
		for i := range len(c.Raw) {
			if !isBlank(c.Raw[i]) && (i == 0 || isBlank(c.Raw[i-1])) {
				fields++
			}
		}
		if len(c.Params) > fields {
			t.Fatalf("parseCmdline(%q): %d parameters from %d fields", b, len(c.Params), fields)
		}
		c.PCI()
		if v, err := parseProcVersion(b); err == nil && v.Release == "" {
			t.Fatal("parseProcVersion succeeded without a release")
		}
		_, _ = parseModules(b)
		if devs, err := parseCharDevices(b); err == nil {
			for _, d := range devs {
				if d.Name == "" {
					t.Fatalf("parseCharDevices(%q): empty name", b)
				}
			}
		}
		if v, err := parseNVIDIAVersion(b); err == nil && v.Version == "" {
			t.Fatal("parseNVIDIAVersion succeeded without a version")
		}
		parseKeyValues(b)
		parseConfig(b)
		_, _ = parseConfigGz(b)
	})
}
