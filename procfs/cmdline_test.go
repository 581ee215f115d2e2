package procfs

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

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
