package procfs

import (
	"testing"
)

// FuzzParseProc runs every /proc parser of the package on the same input.
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
