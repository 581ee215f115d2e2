package sysfs

import (
	"encoding/json"
	"io/fs"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/p2pkit/p2pkit/kversion"
)

func TestPlatformH200(t *testing.T) {
	fsys, err := OpenSnapshot(h200Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	p, err := fsys.Platform()
	if err != nil {
		t.Fatal(err)
	}
	if p.CPU == nil || p.CPU.VendorID != "GenuineIntel" || !p.CPU.Hypervisor() {
		t.Errorf("CPU = %+v", p.CPU)
	}
	if p.Cmdline == nil || p.Cmdline.Raw != "console=ttyS0 reboot=k panic=1 pci=realloc=off swiotlb=noforce" {
		t.Errorf("Cmdline = %+v", p.Cmdline)
	} else if v, ok := p.Cmdline.PCIOption("realloc"); !ok || v != "off" {
		t.Errorf("pci=realloc = %q, %t", v, ok)
	}
	wantMods := []Module{
		{Name: "nvidia_uvm", Size: 1830912, RefCount: -1, State: "Live", Taints: "O"},
		{Name: "nvidia", Size: 14299136, RefCount: -1, State: "Live", Taints: "O"},
	}
	if diff := cmp.Diff(wantMods, p.Modules); diff != "" {
		t.Errorf("modules (-want +got):\n%s", diff)
	}
	if m, ok := LookupMajor(p.CharDevices, "nvidia-uvm"); !ok || m != 238 {
		t.Errorf("nvidia-uvm major = %d, %t; want 238", m, ok)
	}
	if _, ok := LookupMajor(p.CharDevices, "gdrdrv"); ok {
		t.Error("gdrdrv listed in /proc/devices of a machine without it")
	}
	wantNV := &NVIDIADriver{Version: "580.159.04", Major: 580, Open: true,
		Line: "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)"}
	if diff := cmp.Diff(wantNV, p.NVIDIA); diff != "" {
		t.Errorf("NVIDIA (-want +got):\n%s", diff)
	}
	// The capture has no /proc/version, gdrdrv, IOMMU, peer memory or kernel config.
	if p.Kernel != nil || p.GDRDrvParams != nil || p.GDRDrvNode != nil || p.IOMMUGroups != nil ||
		p.IOMMUUnits != nil || p.MemoryPeers != nil || p.KernelConfig.Source != "" {
		t.Errorf("absent items are set: %+v", p)
	}
	if got := p.KernelConfig.Value("CONFIG_PCI_P2PDMA"); got != ConfigUnknown {
		t.Errorf("P2PDMA config = %v, want unknown", got)
	}
}

func TestPlatformSynthetic(t *testing.T) {
	entries := []entry{
		file("proc/version", "Linux version 6.12.0-55-generic (buildd@lcy02) #1 SMP\n"),
		file("proc/devices", "Character devices:\n  1 mem\n509 gdrdrv\n\nBlock devices:\n  7 loop\n"),
		file("proc/driver/gdrdrv/params", "Version: 2.5\nBuilt for NVIDIA driver flavor: opensource\n"+
			"Use persistent mapping: yes\ndbg_enabled: 0\ninfo_enabled: 0\n"),
		charDev("dev/gdrdrv", 509, 0),
		file("sys/kernel/iommu_groups/0/type", "DMA-FQ\n"),
		file("sys/kernel/iommu_groups/12/type", "identity\n"),
		file("sys/kernel/iommu_groups/2/type", "unmanaged\n"),
		directory("sys/kernel/iommu_groups/3"), // an older kernel: no type
		symlink("sys/class/iommu/dmar1", "../../devices/virtual/iommu/dmar1"),
		symlink("sys/class/iommu/dmar0", "../../devices/virtual/iommu/dmar0"),
		file("sys/kernel/mm/memory_peers/nv_mem/version", "1.3\n"),
		directory("sys/kernel/mm/memory_peers/nv_mem_nc"),
		file("boot/config-6.12.0-55-generic", "CONFIG_PCI_P2PDMA=y\n"),
	}
	dirFS, memFS := openBoth(t, entries)
	for kind, fsys := range map[string]FS{"dir": dirFS, "snapshot": memFS} {
		p, err := fsys.Platform()
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if diff := cmp.Diff(&kversion.Version{Release: "6.12.0-55-generic", Major: 6, Minor: 12, Patch: 0}, p.Kernel); diff != "" {
			t.Errorf("%s: kernel (-want +got):\n%s", kind, diff)
		}
		if p.GDRDrvParams["Version"] != "2.5" || p.GDRDrvParams["Built for NVIDIA driver flavor"] != "opensource" {
			t.Errorf("%s: gdrdrv params = %v", kind, p.GDRDrvParams)
		}
		wantGroups := []IOMMUGroup{{0, IOMMUDMAFQ}, {2, IOMMUUnmanaged}, {3, IOMMUUnknown}, {12, IOMMUIdentity}}
		if diff := cmp.Diff(wantGroups, p.IOMMUGroups); diff != "" {
			t.Errorf("%s: IOMMU groups (-want +got):\n%s", kind, diff)
		}
		if diff := cmp.Diff([]string{"dmar0", "dmar1"}, p.IOMMUUnits); diff != "" {
			t.Errorf("%s: IOMMU units (-want +got):\n%s", kind, diff)
		}
		if diff := cmp.Diff(map[string]string{"nv_mem": "1.3", "nv_mem_nc": ""}, p.MemoryPeers); diff != "" {
			t.Errorf("%s: memory peers (-want +got):\n%s", kind, diff)
		}
		if got := p.KernelConfig.Value("CONFIG_PCI_P2PDMA"); got != ConfigYes {
			t.Errorf("%s: P2PDMA config = %v", kind, got)
		}
		if p.CPU != nil || p.Cmdline != nil || p.Modules != nil || p.NVIDIA != nil {
			t.Errorf("%s: absent items are set", kind)
		}
	}
	// Device numbers come from the tar header in a snapshot; on disk the test
	// cannot create a node without privileges, so only the snapshot is checked.
	p, _ := memFS.Platform()
	want := &DevNode{Mode: fs.ModeDevice | fs.ModeCharDevice | 0o666, Major: 509, Minor: 0, NumberKnown: true}
	if diff := cmp.Diff(want, p.GDRDrvNode); diff != "" {
		t.Errorf("gdrdrv node (-want +got):\n%s", diff)
	}
	if major, _ := LookupMajor(p.CharDevices, "gdrdrv"); major != p.GDRDrvNode.Major {
		t.Errorf("node major %d differs from /proc/devices' %d", p.GDRDrvNode.Major, major)
	}
}

// TestPlatformErrors checks that files which exist but are malformed are reported
// while everything else is still read.
func TestPlatformErrors(t *testing.T) {
	_, memFS := openBoth(t, []entry{
		file("proc/version", "garbage\n"),
		file("proc/modules", "nvidia x\n"),
		file("proc/cmdline", "quiet\n"),
		file("sys/kernel/iommu_groups/0/type", "sideways\n"),
		file("sys/kernel/iommu_groups/1/type", "DMA\n"),
	})
	p, err := memFS.Platform()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"/proc/version", "/proc/modules", "/sys/kernel/iommu_groups/0/type"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if p.Cmdline == nil || p.Cmdline.Raw != "quiet" {
		t.Errorf("Cmdline = %+v, want it read despite the other errors", p.Cmdline)
	}
	if len(p.IOMMUGroups) != 2 || p.IOMMUGroups[1].Type != IOMMUDMA {
		t.Errorf("IOMMU groups = %+v", p.IOMMUGroups)
	}
}

func TestDevNodeName(t *testing.T) {
	_, memFS := openBoth(t, []entry{charDev("dev/gdrdrv", 509, 0)})
	for _, bad := range []string{"", "../proc/cmdline", ".."} {
		if _, err := memFS.DevNode(bad); err == nil {
			t.Errorf("DevNode(%q) succeeded", bad)
		}
	}
}

func TestValueNames(t *testing.T) {
	got, err := json.Marshal(map[string]any{
		"config": []ConfigValue{ConfigUnknown, ConfigNo, ConfigYes, ConfigModule},
		"iommu":  []IOMMUDomainType{IOMMUUnknown, IOMMUBlocked, IOMMUIdentity, IOMMUUnmanaged, IOMMUDMA, IOMMUDMAFQ},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"config":["unknown","n","y","m"],"iommu":["unknown","blocked","identity","unmanaged","DMA","DMA-FQ"]}`
	if string(got) != want {
		t.Errorf("JSON = %s, want %s", got, want)
	}
	if s := IOMMUDomainType(9).String(); s != "IOMMUDomainType(9)" {
		t.Errorf("out-of-range type = %q", s)
	}
}
