package node

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/roottest"
	"github.com/p2pkit/p2pkit/kversion"
	"github.com/p2pkit/p2pkit/procfs"
	"github.com/p2pkit/p2pkit/snapshot"
	"github.com/p2pkit/p2pkit/sysfs"
)

func TestPlatformH200(t *testing.T) {
	fsys, err := snapshot.Open("../testdata/h200-2gpu-vm/snapshot.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ReadPlatform(fsys)
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
	wantMods := procfs.Modules{
		{Name: "nvidia_uvm", Size: 1830912, RefCount: -1, State: "Live", Taints: "O"},
		{Name: "nvidia", Size: 14299136, RefCount: -1, State: "Live", Taints: "O"},
	}
	if diff := cmp.Diff(wantMods, p.Modules); diff != "" {
		t.Errorf("modules (-want +got):\n%s", diff)
	}
	if m, ok := procfs.LookupMajor(p.CharDevices, "nvidia-uvm"); !ok || m != 238 {
		t.Errorf("nvidia-uvm major = %d, %t; want 238", m, ok)
	}
	if _, ok := procfs.LookupMajor(p.CharDevices, "gdrdrv"); ok {
		t.Error("gdrdrv listed in /proc/devices of a machine without it")
	}
	wantNV := &procfs.NVIDIADriver{Version: "580.159.04", Major: 580, Open: true,
		Line: "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)"}
	if diff := cmp.Diff(wantNV, p.NVIDIA); diff != "" {
		t.Errorf("NVIDIA (-want +got):\n%s", diff)
	}
	// The capture has no /proc/version, gdrdrv, IOMMU, peer memory or kernel config.
	if p.Kernel != nil || p.GDRDrvParams != nil || p.GDRDrvNode != nil || p.IOMMUGroups != nil ||
		p.IOMMUUnits != nil || p.MemoryPeers != nil || p.KernelConfig.Source != "" {
		t.Errorf("absent items are set: %+v", p)
	}
	if got := p.KernelConfig.Value("CONFIG_PCI_P2PDMA"); got != procfs.ConfigUnknown {
		t.Errorf("P2PDMA config = %v, want unknown", got)
	}
}

func TestPlatformSynthetic(t *testing.T) {
	entries := []roottest.Entry{
		roottest.File("proc/version", "Linux version 6.12.0-55-generic (buildd@lcy02) #1 SMP\n"),
		roottest.File("proc/devices", "Character devices:\n  1 mem\n509 gdrdrv\n\nBlock devices:\n  7 loop\n"),
		roottest.File("proc/driver/gdrdrv/params", "Version: 2.5\nBuilt for NVIDIA driver flavor: opensource\n"+
			"Use persistent mapping: yes\ndbg_enabled: 0\ninfo_enabled: 0\n"),
		roottest.CharDev("dev/gdrdrv", 509, 0),
		roottest.File("sys/kernel/iommu_groups/0/type", "DMA-FQ\n"),
		roottest.File("sys/kernel/iommu_groups/12/type", "identity\n"),
		roottest.File("sys/kernel/iommu_groups/2/type", "unmanaged\n"),
		roottest.Dir("sys/kernel/iommu_groups/3"), // an older kernel: no type
		roottest.Symlink("sys/class/iommu/dmar1", "../../devices/virtual/iommu/dmar1"),
		roottest.Symlink("sys/class/iommu/dmar0", "../../devices/virtual/iommu/dmar0"),
		roottest.File("sys/kernel/mm/memory_peers/nv_mem/version", "1.3\n"),
		roottest.Dir("sys/kernel/mm/memory_peers/nv_mem_nc"),
		roottest.File("boot/config-6.12.0-55-generic", "CONFIG_PCI_P2PDMA=y\n"),
	}
	dirFS, memFS := roottest.Both(t, entries)
	for kind, fsys := range map[string]hostfs.Root{"dir": dirFS, "snapshot": memFS} {
		p, err := ReadPlatform(fsys)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if diff := cmp.Diff(&kversion.Version{Release: "6.12.0-55-generic", Major: 6, Minor: 12, Patch: 0}, p.Kernel); diff != "" {
			t.Errorf("%s: kernel (-want +got):\n%s", kind, diff)
		}
		if p.GDRDrvParams["Version"] != "2.5" || p.GDRDrvParams["Built for NVIDIA driver flavor"] != "opensource" {
			t.Errorf("%s: gdrdrv params = %v", kind, p.GDRDrvParams)
		}
		wantGroups := []sysfs.IOMMUGroup{{ID: 0, Type: sysfs.IOMMUDMAFQ}, {ID: 2, Type: sysfs.IOMMUUnmanaged}, {ID: 3, Type: sysfs.IOMMUUnknown}, {ID: 12, Type: sysfs.IOMMUIdentity}}
		if diff := cmp.Diff(wantGroups, p.IOMMUGroups); diff != "" {
			t.Errorf("%s: IOMMU groups (-want +got):\n%s", kind, diff)
		}
		if diff := cmp.Diff([]string{"dmar0", "dmar1"}, p.IOMMUUnits); diff != "" {
			t.Errorf("%s: IOMMU units (-want +got):\n%s", kind, diff)
		}
		if diff := cmp.Diff(map[string]string{"nv_mem": "1.3", "nv_mem_nc": ""}, p.MemoryPeers); diff != "" {
			t.Errorf("%s: memory peers (-want +got):\n%s", kind, diff)
		}
		if got := p.KernelConfig.Value("CONFIG_PCI_P2PDMA"); got != procfs.ConfigYes {
			t.Errorf("%s: P2PDMA config = %v", kind, got)
		}
		if p.CPU != nil || p.Cmdline != nil || p.Modules != nil || p.NVIDIA != nil {
			t.Errorf("%s: absent items are set", kind)
		}
	}
	// Device numbers come from the tar header in a snapshot; on disk the test
	// cannot create a node without privileges, so only the snapshot is checked.
	p, _ := ReadPlatform(memFS)
	want := &procfs.DevNode{Mode: fs.ModeDevice | fs.ModeCharDevice | 0o666, Major: 509, Minor: 0, NumberKnown: true}
	if diff := cmp.Diff(want, p.GDRDrvNode); diff != "" {
		t.Errorf("gdrdrv node (-want +got):\n%s", diff)
	}
	if major, _ := procfs.LookupMajor(p.CharDevices, "gdrdrv"); major != p.GDRDrvNode.Major {
		t.Errorf("node major %d differs from /proc/devices' %d", p.GDRDrvNode.Major, major)
	}
}

// TestPlatformIOMMUTyped checks that only the groups asked for have their types
// read, the others left not read, and that a group named other than by its number,
// as the kernel names one, is not a group.
func TestPlatformIOMMUTyped(t *testing.T) {
	_, memFS := roottest.Both(t, []roottest.Entry{
		roottest.File("sys/kernel/iommu_groups/0/type", "DMA-FQ\n"),
		roottest.File("sys/kernel/iommu_groups/2/type", "identity\n"),
		roottest.File("sys/kernel/iommu_groups/05/type", "DMA\n"),
		roottest.File("sys/kernel/iommu_groups/+7/type", "DMA\n"),
		roottest.File("sys/kernel/iommu_groups/9/type", "sideways\n"),
	})
	p, err := readPlatform(memFS, func(id int) bool { return id == 2 })
	if err != nil {
		t.Fatal(err)
	}
	want := []sysfs.IOMMUGroup{{ID: 0, Type: sysfs.IOMMUNotRead}, {ID: 2, Type: sysfs.IOMMUIdentity}, {ID: 9, Type: sysfs.IOMMUNotRead}}
	if diff := cmp.Diff(want, p.IOMMUGroups); diff != "" {
		t.Errorf("IOMMU groups (-want +got):\n%s", diff)
	}
	err = sysfs.New(memFS).IOMMUTypes(p.IOMMUGroups, func(id int) bool { return id == 9 })
	if err == nil || !strings.Contains(err.Error(), "iommu_groups/9/type") {
		t.Errorf("error %v does not name group 9's type", err)
	}
	want[2].Type = sysfs.IOMMUUnknown
	if diff := cmp.Diff(want, p.IOMMUGroups); diff != "" {
		t.Errorf("IOMMU groups after group 9 (-want +got):\n%s", diff)
	}
}

// TestPlatformErrors checks that files which exist but are malformed are reported
// while everything else is still read.
func TestPlatformErrors(t *testing.T) {
	_, memFS := roottest.Both(t, []roottest.Entry{
		roottest.File("proc/version", "garbage\n"),
		roottest.File("proc/modules", "nvidia x\n"),
		roottest.File("proc/cmdline", "quiet\n"),
		roottest.File("sys/kernel/iommu_groups/0/type", "sideways\n"),
		roottest.File("sys/kernel/iommu_groups/1/type", "DMA\n"),
	})
	p, err := ReadPlatform(memFS)
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
	if len(p.IOMMUGroups) != 2 || p.IOMMUGroups[1].Type != sysfs.IOMMUDMA {
		t.Errorf("IOMMU groups = %+v", p.IOMMUGroups)
	}
}
