package sysfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/snapshot"
)

func mustAddr(t testing.TB, s string) pcie.Address {
	t.Helper()
	a, err := pcie.ParseAddress(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func ptr[T any](v T) *T { return &v }

// h200GPU is what the capture says of GPU at addr (testdata/h200-2gpu-vm/README.md):
// BAR0 16 MiB, BAR1 (resource index 2) 256 GiB, BAR3 (index 4) 32 MiB. The Gen5 x16
// link is in config space (LNKSTA, LNKCAP), so the link attributes are not read.
func h200GPU(t testing.TB, addr string, bar0, bar1, bar3 uint64) pcie.Record {
	const flags = 0x14220c // IORESOURCE_MEM | PREFETCH | MEM_64 | SIZEALIGN, BAR bits
	return pcie.Record{
		Address: mustAddr(t, addr), Path: "pci0000:00/" + addr,
		Vendor: 0x10de, Device: 0x2335, SubVendor: 0x10de, SubDevice: 0x18bf,
		Class: 0x030200, Revision: 0xa1, Driver: "nvidia", NUMANode: ptr(-1),
		LocalCPUList: "0-31",
		Resources: []pcie.Resource{
			{Index: 0, Start: bar0, End: bar0 + 16<<20 - 1, Flags: flags},
			{Index: 2, Start: bar1, End: bar1 + 256<<30 - 1, Flags: flags},
			{Index: 4, Start: bar3, End: bar3 + 32<<20 - 1, Flags: flags},
		},
	}
}

// ignoreConfig leaves the config bytes to separate checks.
var ignoreConfig = cmpopts.IgnoreFields(pcie.Record{}, "Config")

func TestPCIRecordsH200(t *testing.T) {
	fsys := openSnapshot(t, h200Snapshot)
	recs, err := fsys.PCIRecords()
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, r := range recs {
		addrs = append(addrs, r.Address.String())
		if r.Err != nil {
			t.Errorf("%s: %v", r.Address, r.Err)
		}
	}
	wantAddrs := []string{"0000:00:00.0", "0000:00:01.0", "0000:00:02.0", "0000:00:03.0",
		"0000:00:04.0", "0000:00:05.0", "0000:00:06.0", "0000:00:07.0"}
	if diff := cmp.Diff(wantAddrs, addrs); diff != "" {
		t.Fatalf("addresses (-want +got):\n%s", diff)
	}
	want := []pcie.Record{
		h200GPU(t, "0000:00:06.0", 0x104002000000, 0x100000000000, 0x104000000000),
		h200GPU(t, "0000:00:07.0", 0x104003000000, 0x108000000000, 0x104004000000),
	}
	if diff := cmp.Diff(want, recs[6:], ignoreConfig, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("GPU records (-want +got):\n%s", diff)
	}
	for _, r := range recs[6:] {
		if bar1 := r.Resources[1]; bar1.Index != 2 || bar1.Size() != 256<<30 || !bar1.Is64() || !bar1.Prefetchable() {
			t.Errorf("%s: BAR1 = %+v: size %d, 64-bit %t, prefetchable %t; want index 2, 256 GiB, 64-bit, prefetchable",
				r.Address, bar1, bar1.Size(), bar1.Is64(), bar1.Prefetchable())
		}
		if len(r.Config) != 4096 || !bytes.HasPrefix(r.Config, []byte{0xde, 0x10, 0x35, 0x23}) {
			t.Errorf("%s: config is %d bytes starting % x, want 4096 starting de 10 35 23",
				r.Address, len(r.Config), r.Config[:min(4, len(r.Config))])
		}
	}
	host := recs[0]
	if host.Vendor != 0x8086 || host.Device != 0x0d57 || host.Class != 0x060000 || host.Driver != "" {
		t.Errorf("host bridge = %04x:%04x class %06x driver %q, want 8086:0d57 class 060000 unbound",
			host.Vendor, host.Device, host.Class, host.Driver)
	}
	if len(recs[1].Config) != 256 {
		t.Errorf("virtio function config is %d bytes, want 256", len(recs[1].Config))
	}
}

// TestPCIRecordsSameOnDisk reads the capture unpacked to a directory: the records must
// equal those read from the tar, which shows both go through one code path.
func TestPCIRecordsSameOnDisk(t *testing.T) {
	snap := openSnapshot(t, h200Snapshot)
	want, err := snap.PCIRecords()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := openDirFS(extract(t, h200Snapshot))
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	got, err := dir.PCIRecords()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("directory records differ from snapshot records (-snapshot +dir):\n%s", diff)
	}
}

// gpuEntries is a minimal function directory plus its bus link.
func gpuEntries(bdf string, extra ...entry) []entry {
	dir := "sys/devices/pci0000:00/" + bdf + "/"
	es := []entry{
		symlink("sys/bus/pci/devices/"+bdf, "../../../devices/pci0000:00/"+bdf),
		file(dir+"vendor", "0x10de\n"),
		file(dir+"device", "0x2335\n"),
		file(dir+"class", "0x030200\n"),
		file(dir+"config", string(make([]byte, 64))),
	}
	return append(es, extra...)
}

func TestPCIRecordsAttributes(t *testing.T) {
	d := "sys/devices/pci0000:00/0000:00:06.0/"
	entries := gpuEntries("0000:00:06.0",
		file(d+"subsystem_vendor", "0x10de\n"),
		file(d+"subsystem_device", "0x18bf\n"),
		file(d+"revision", "0xa1\n"),
		file(d+"numa_node", "1\n"),
		file(d+"local_cpulist", "0-3,8-11\n"),
		file(d+"current_link_speed", "8 GT/s\n"),
		file(d+"current_link_width", "8\n"),
		file(d+"max_link_speed", "16.0 GT/s PCIe\n"),
		file(d+"max_link_width", "16\n"),
		file(d+"resource", "0x0000000000001000 0x0000000000001fff 0x0000000000040200\n"+
			"0x0000000000000000 0x0000000000000000 0x0000000000000000\n"),
		file(d+"sriov_totalvfs", "16\n"),
		file(d+"sriov_numvfs", "11\n"),
		file(d+"p2pmem/size", "8388608\n"),
		file(d+"p2pmem/available", "4194304\n"),
		file(d+"p2pmem/published", "1\n"),
		entry{Name: d + "p2pmem/allocate", Mode: 0o660},
		symlink(d+"driver", "../../../bus/pci/drivers/nvme"),
		symlink(d+"iommu_group", "../../../kernel/iommu_groups/17"),
		directory(d+"net/eth0"),
		directory(d+"net/eth1"),
		directory(d+"infiniband/mlx5_0"),
		directory(d+"nvme/nvme3"),
	)
	// The kernel links VFs 0 to NumVFs-1; virtfn10 must come after virtfn2.
	var vfs []pcie.Address
	for n := range 11 {
		vf := fmt.Sprintf("0000:00:%02x.%d", 7+n/8, n%8)
		entries = append(entries, symlink(fmt.Sprintf("%svirtfn%d", d, n), "../"+vf))
		vfs = append(vfs, mustAddr(t, vf))
	}
	entries = append(entries, gpuEntries("0000:00:06.1",
		symlink("sys/devices/pci0000:00/0000:00:06.1/physfn", "../0000:00:06.0"))...)
	want := []pcie.Record{{
		Address: mustAddr(t, "0000:00:06.0"), Path: "pci0000:00/0000:00:06.0",
		Vendor: 0x10de, Device: 0x2335, SubVendor: 0x10de, SubDevice: 0x18bf,
		Class: 0x030200, Revision: 0xa1, Config: make([]byte, 64),
		Driver: "nvme", NUMANode: ptr(1), IOMMUGroup: ptr(17), LocalCPUList: "0-3,8-11",
		CurrentLink: pcie.Link{Speed: 3, Width: 8}, MaxLink: pcie.Link{Speed: 4, Width: 16},
		Resources: []pcie.Resource{{Index: 0, Start: 0x1000, End: 0x1fff, Flags: 0x40200}},
		VirtFns:   vfs,
		SRIOV:     &pcie.SRIOVCounts{TotalVFs: 16, NumVFs: 11},
		P2PMem:    &pcie.P2PMem{Size: 8 << 20, Available: 4 << 20, Published: true, Allocate: true},
		NetDevs:   []string{"eth0", "eth1"},
		RDMADevs:  []string{"mlx5_0"},
		NVMeDevs:  []string{"nvme3"},
	}, {
		Address: mustAddr(t, "0000:00:06.1"), Path: "pci0000:00/0000:00:06.1",
		Vendor: 0x10de, Device: 0x2335, Class: 0x030200, Config: make([]byte, 64),
		PhysFn: ptr(mustAddr(t, "0000:00:06.0")),
	}}
	dirFS, memFS := openBoth(t, entries)
	for name, fsys := range map[string]FS{"dir": dirFS, "snapshot": memFS} {
		got, err := fsys.PCIRecords()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

// TestPCIRecordsBadFunction checks that a malformed, truncated, missing or escaping
// function gets its own error naming the path, and the others are still read.
func TestPCIRecordsBadFunction(t *testing.T) {
	good := gpuEntries("0000:00:01.0")
	tests := []struct {
		name    string
		entries []entry
		wantErr string // in the bad function's error
	}{
		{"malformed vendor", gpuEntries("0000:00:02.0", file("sys/devices/pci0000:00/0000:00:02.0/vendor", "zz\n")),
			"/sys/devices/pci0000:00/0000:00:02.0/vendor"},
		{"truncated resource", gpuEntries("0000:00:02.0", file("sys/devices/pci0000:00/0000:00:02.0/resource", "0x0000000000001000 0x00000")),
			"/sys/devices/pci0000:00/0000:00:02.0/resource"},
		{"bad link speed", gpuEntries("0000:00:02.0", file("sys/devices/pci0000:00/0000:00:02.0/current_link_speed", "fast\n")),
			"/sys/devices/pci0000:00/0000:00:02.0/current_link_speed"},
		{"oversized attribute", gpuEntries("0000:00:02.0", file("sys/devices/pci0000:00/0000:00:02.0/local_cpulist", strings.Repeat("0", 5000))),
			"/sys/devices/pci0000:00/0000:00:02.0/local_cpulist"},
		{"missing class", []entry{
			symlink("sys/bus/pci/devices/0000:00:02.0", "../../../devices/pci0000:00/0000:00:02.0"),
			file("sys/devices/pci0000:00/0000:00:02.0/vendor", "0x10de\n"),
			file("sys/devices/pci0000:00/0000:00:02.0/device", "0x10de\n"),
			file("sys/devices/pci0000:00/0000:00:02.0/config", strings.Repeat("\x00", 64)),
		}, "/sys/devices/pci0000:00/0000:00:02.0/class"},
		{"link out of the root", []entry{symlink("sys/bus/pci/devices/0000:00:02.0", "../../../../../etc")},
			"outside the root"},
		{"absolute link", []entry{symlink("sys/bus/pci/devices/0000:00:02.0", "/sys/devices/pci0000:00/0000:00:01.0")},
			"outside the root"},
		{"dangling link", []entry{symlink("sys/bus/pci/devices/0000:00:02.0", "../../../devices/pci0000:00/0000:00:02.0")},
			"/sys/devices/pci0000:00/0000:00:02.0"},
		{"directory link leaving the root", []entry{
			symlink("sys/bus/pci/devices/0000:00:02.0", "../../../devices/pci0000:00/0000:00:02.0"),
			symlink("sys/devices/pci0000:00/0000:00:02.0", "../../../../outside"),
		}, "/sys/devices/pci0000:00/0000:00:02.0"},
		{"attribute link leaving the function", gpuEntries("0000:00:02.0",
			file("sys/secret", "0x1234\n"),
			symlink("sys/devices/pci0000:00/0000:00:02.0/subsystem_vendor", "../../../secret")),
			"/sys/devices/pci0000:00/0000:00:02.0/subsystem_vendor"},
		{"link loop", gpuEntries("0000:00:02.0",
			symlink("sys/devices/pci0000:00/0000:00:02.0/revision", "revision")),
			"/sys/devices/pci0000:00/0000:00:02.0/revision"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dirFS, memFS := openBoth(t, append(append([]entry{}, good...), tt.entries...))
			for name, fsys := range map[string]FS{"dir": dirFS, "snapshot": memFS} {
				recs, err := fsys.PCIRecords()
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if len(recs) != 2 {
					t.Fatalf("%s: got %d records, want 2", name, len(recs))
				}
				if recs[0].Err != nil || recs[0].Vendor != 0x10de {
					t.Errorf("%s: good function: vendor %04x, err %v", name, recs[0].Vendor, recs[0].Err)
				}
				if recs[1].Err == nil || !strings.Contains(recs[1].Err.Error(), tt.wantErr) {
					t.Errorf("%s: bad function error = %v, want one containing %q", name, recs[1].Err, tt.wantErr)
				}
				if recs[1].Address != mustAddr(t, "0000:00:02.0") {
					t.Errorf("%s: bad function address = %s", name, recs[1].Address)
				}
			}
		})
	}
}

// TestPCIRecordsLinksInside checks that links which stay inside a function's
// directory are followed, for files and directories alike, on both kinds of root (on
// Linux the directory root hands them from its descriptor path to os.Root).
func TestPCIRecordsLinksInside(t *testing.T) {
	d := "sys/devices/pci0000:00/0000:00:06.0/"
	dirFS, memFS := openBoth(t, gpuEntries("0000:00:06.0",
		file(d+"real/revision", "0xa1\n"),
		symlink(d+"revision", "real/revision"),
		file(d+"pool/size", "4096\n"),
		file(d+"pool/available", "0\n"),
		file(d+"pool/published", "1\n"),
		symlink(d+"p2pmem", "pool"),
		symlink(d+"driver", "../../../bus/pci/drivers/nvme"),
	))
	for kind, fsys := range map[string]FS{"dir": dirFS, "snapshot": memFS} {
		recs, err := fsys.PCIRecords()
		if err != nil {
			t.Fatal(err)
		}
		r := recs[0]
		want := &pcie.P2PMem{Size: 4096, Published: true}
		if r.Err != nil || r.Revision != 0xa1 || !cmp.Equal(r.P2PMem, want) {
			t.Errorf("%s: revision %#x, p2pmem %+v, err %v; want 0xa1, %+v", kind, r.Revision, r.P2PMem, r.Err, want)
		}
	}
}

// TestPCIRecordsUnprivilegedConfig reads a config file cut at 64 bytes, as the kernel
// serves it to a reader without CAP_SYS_ADMIN.
func TestPCIRecordsUnprivilegedConfig(t *testing.T) {
	root := extract(t, h200Snapshot)
	cfg := filepath.Join(root, "sys/devices/pci0000:00/0000:00:06.0/config")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, b[:64], 0o644); err != nil {
		t.Fatal(err)
	}
	fsys, err := openDirFS(root)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	recs, err := fsys.PCIRecords()
	if err != nil {
		t.Fatal(err)
	}
	gpu := recs[6]
	if gpu.Err != nil || !bytes.Equal(gpu.Config, b[:64]) {
		t.Errorf("config = %d bytes (err %v), want the first 64 bytes", len(gpu.Config), gpu.Err)
	}
}

func TestPCIRecordsNoSysfs(t *testing.T) {
	fsys, err := openDirFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	_, err = fsys.PCIRecords()
	if !errors.Is(err, ErrNoSysfs) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v, want ErrNoSysfs and fs.ErrNotExist", err)
	}
	if err != nil && !strings.Contains(err.Error(), "/sys/bus/pci/devices") {
		t.Errorf("err = %v, want it to name /sys/bus/pci/devices", err)
	}
}

// syntheticTree lays out n functions: root ports on bus 0 of one host bridge, each
// with up to 32 endpoints below it, every function with the attributes PCIRecords
// reads.
func syntheticTree(n int) []entry {
	var es []entry
	fn := func(dir, bdf string, class string) {
		p := dir + "/" + bdf
		rel := strings.Repeat("../", strings.Count(p, "/")-1)
		es = append(es,
			symlink("sys/bus/pci/devices/"+bdf, "../../../"+strings.TrimPrefix(p, "sys/")),
			file(p+"/vendor", "0x8086\n"), file(p+"/device", "0x1234\n"),
			file(p+"/class", class+"\n"), file(p+"/revision", "0x01\n"),
			file(p+"/subsystem_vendor", "0x8086\n"), file(p+"/subsystem_device", "0x0000\n"),
			file(p+"/config", string(make([]byte, 256))),
			file(p+"/numa_node", "0\n"), file(p+"/local_cpulist", "0-63\n"),
			file(p+"/current_link_speed", "16.0 GT/s PCIe\n"), file(p+"/current_link_width", "16\n"),
			file(p+"/max_link_speed", "16.0 GT/s PCIe\n"), file(p+"/max_link_width", "16\n"),
			file(p+"/resource", strings.Repeat("0x0000000000000000 0x0000000000000000 0x0000000000000000\n", 13)),
			symlink(p+"/driver", rel+"bus/pci/drivers/pcieport"),
			symlink(p+"/iommu_group", rel+"kernel/iommu_groups/1"),
		)
	}
	count := 0
	for port := 1; port < 32 && count < n; port++ {
		rp := fmt.Sprintf("0000:00:%02x.0", port)
		fn("sys/devices/pci0000:00", rp, "0x060400")
		count++
		for dev := 0; dev < 32 && count < n; dev++ {
			fn("sys/devices/pci0000:00/"+rp, fmt.Sprintf("0000:%02x:%02x.0", port, dev), "0x020000")
			count++
		}
	}
	return es
}

func TestSyntheticTree(t *testing.T) {
	dirFS, memFS := openBoth(t, syntheticTree(40))
	for name, fsys := range map[string]FS{"dir": dirFS, "snapshot": memFS} {
		recs, err := fsys.PCIRecords()
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 40 {
			t.Fatalf("%s: %d records, want 40", name, len(recs))
		}
		ep := recs[2] // 0000:01:00.0, below the first root port, after the two ports
		if ep.Err != nil || ep.Path != "pci0000:00/0000:00:01.0/0000:01:00.0" || ep.Class != 0x020000 ||
			ep.Driver != "pcieport" || ep.IOMMUGroup == nil || *ep.IOMMUGroup != 1 || len(ep.Resources) != 0 {
			t.Errorf("%s: endpoint = %+v", name, ep)
		}
	}
}

// BenchmarkPCIRecords reads a flat tree of 1000 functions from disk whose config
// files hold no header, so that every ID and link comes from its attribute.
func BenchmarkPCIRecords(b *testing.B) {
	dir := b.TempDir()
	writeTree(b, dir, syntheticTree(1000))
	fsys, err := openDirFS(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer fsys.Close()
	for b.Loop() {
		recs, err := fsys.PCIRecords()
		if err != nil || len(recs) != 1000 {
			b.Fatalf("%d records, err %v", len(recs), err)
		}
	}
}

// BenchmarkPCIRecordsLarge reads the 1,028-function synthetic machine (8 GPUs and
// 8 NICs behind PEX switches, 960 VFs), the tree make bench-topo times.
func BenchmarkPCIRecordsLarge(b *testing.B) {
	dir := b.TempDir()
	if err := fixture.Large(960).NoDeviceNodes().Write(dir); err != nil {
		b.Fatal(err)
	}
	fsys, err := openDirFS(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer fsys.Close()
	b.ReportAllocs()
	for b.Loop() {
		recs, err := fsys.PCIRecords()
		if err != nil || len(recs) != 1028 {
			b.Fatalf("%d records, err %v", len(recs), err)
		}
	}
}

// TestAERCounts reads the aer_dev_* totals of the degraded-link machine, whose
// gpu1 has logged 37 correctable errors, from a tree and from its snapshot.
func TestAERCounts(t *testing.T) {
	m := fixture.DegradedLink()
	gpu1 := m.Func("gpu1").Address()
	for name, fsys := range machineFS(t, m) {
		recs, err := fsys.PCIRecords()
		if err != nil {
			t.Fatal(err)
		}
		withCounts := 0
		for _, r := range recs {
			if r.AER == nil {
				continue
			}
			withCounts++
			want := pcie.AERCounts{}
			if r.Address == gpu1 {
				want.Correctable = 37
			}
			if diff := cmp.Diff(want, *r.AER); diff != "" {
				t.Errorf("%s: %s AER (-want +got):\n%s", name, r.Address, diff)
			}
		}
		if withCounts == 0 {
			t.Errorf("%s: no function has AER counts", name)
		}
	}
}

// machineFS writes m to a directory and to a snapshot and opens both.
func machineFS(t *testing.T, m *fixture.Machine) map[string]FS {
	t.Helper()
	dir := t.TempDir()
	if err := m.NoDeviceNodes().Write(dir); err != nil {
		t.Fatal(err)
	}
	var snap bytes.Buffer
	if err := m.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	dirFS, err := openDirFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dirFS.Close() })
	memRoot, err := snapshot.Read(&snap)
	if err != nil {
		t.Fatal(err)
	}
	memFS := New(memRoot)
	return map[string]FS{"dir": dirFS, "snapshot": memFS}
}

// TestVirtFnIDs checks where a VF's IDs come from: the PF's vendor and the VF Device
// ID of its SR-IOV capability when the PF's extended config space was read, as the
// kernel sets them (pci_iov_add_virtfn), and the VF's own attributes otherwise, be
// it that the reader gets 64 bytes of every config file or that the PF's alone is
// short. One VF's device attribute is made to disagree, to show which source was
// used.
func TestVirtFnIDs(t *testing.T) {
	const capDevice, attrDevice = 0x101e, 0xbeef
	for _, tt := range []struct {
		name  string
		view  int  // ConfigView
		pfCut bool // the PF's config file holds only a blank header
		want  uint16
	}{
		{"root", 0, false, capDevice},
		{"unprivileged", 64, false, attrDevice},
		{"root, PF capability unread", 0, true, attrDevice},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := fixture.SRIOVNIC().ConfigView(tt.view)
			odd := m.Func("vf3")
			m.File("sys/devices/"+odd.DevicePath()+"/device", fmt.Sprintf("%#04x\n", attrDevice))
			if tt.pfCut {
				m.File("sys/devices/"+m.Func("pf0").DevicePath()+"/config", string(make([]byte, 64)))
			}
			for name, fsys := range machineFS(t, m) {
				recs, err := fsys.PCIRecords()
				if err != nil {
					t.Fatal(err)
				}
				vfs := 0
				for _, r := range recs {
					if r.PhysFn == nil {
						continue
					}
					vfs++
					want := uint16(capDevice)
					if r.Address == odd.Address() {
						want = tt.want
					}
					if r.Err != nil || r.Vendor != 0x15b3 || r.Device != want {
						t.Errorf("%s: %s IDs %04x:%04x, err %v; want 15b3:%04x", name, r.Address, r.Vendor, r.Device, r.Err, want)
					}
				}
				if vfs != 16 {
					t.Errorf("%s: %d VFs, want 16", name, vfs)
				}
			}
		})
	}
}

// TestPCIRecordsUnshownAttributes puts attributes where the kernel never shows them:
// AER totals and SR-IOV counts on a function whose extended config space has neither
// capability (aer_stats_attrs_are_visible, sriov_pf_attrs_are_visible), class
// devices below a function with no driver, and an NVMe controller below a function
// the nvme driver does not drive. They are not read. With the 64-byte
// view the capabilities are unknown, so the attributes are read.
func TestPCIRecordsUnshownAttributes(t *testing.T) {
	for _, tt := range []struct {
		name    string
		view    int
		wantAER bool
	}{
		{"root", 0, false},
		{"unprivileged", 64, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := fixture.SRIOVNIC().ConfigView(tt.view)
			vf := m.Func("vf0")
			dir := "sys/devices/" + vf.DevicePath()
			m.File(dir+"/aer_dev_correctable", "TOTAL_ERR_COR 1\n")
			m.File(dir+"/aer_dev_nonfatal", "TOTAL_ERR_NONFATAL 0\n")
			m.File(dir+"/aer_dev_fatal", "TOTAL_ERR_FATAL 0\n")
			m.File(dir+"/sriov_totalvfs", "0\n")
			m.File(dir+"/sriov_numvfs", "0\n")
			// The endpoint at 00:00.0 has no driver; only nvme registers NVMe
			// controllers, and pf1 is bound to mlx5_core.
			m.File("sys/devices/pci0000:00/0000:00:00.0/net/eth9/ifindex", "9\n")
			pf1 := m.Func("pf1")
			m.File("sys/devices/"+pf1.DevicePath()+"/nvme/nvme9/dev", "259:0\n")
			for name, fsys := range machineFS(t, m) {
				recs, err := fsys.PCIRecords()
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range recs {
					switch r.Address {
					case vf.Address():
						if (r.AER != nil) != tt.wantAER || (r.SRIOV != nil) != tt.wantAER {
							t.Errorf("%s: VF AER %+v, SR-IOV %+v; want them read %t", name, r.AER, r.SRIOV, tt.wantAER)
						}
					case mustAddr(t, "0000:00:00.0"):
						if r.Driver != "" || r.NetDevs != nil {
							t.Errorf("%s: driverless %s: driver %q, net %q", name, r.Address, r.Driver, r.NetDevs)
						}
					case pf1.Address():
						if r.Driver != "mlx5_core" || r.NetDevs == nil || r.NVMeDevs != nil {
							t.Errorf("%s: %s: driver %q, net %q, nvme %q; want mlx5_core, its netdev, no nvme", name, r.Address, r.Driver, r.NetDevs, r.NVMeDevs)
						}
					}
				}
			}
		})
	}
}

// TestPCIRecordsLocalCPUs reads local_cpulist of functions on two nodes and on none.
func TestPCIRecordsLocalCPUs(t *testing.T) {
	fn := func(bdf, node, cpus string) []entry {
		d := "sys/devices/pci0000:00/" + bdf + "/"
		return gpuEntries(bdf, file(d+"numa_node", node+"\n"), file(d+"local_cpulist", cpus+"\n"))
	}
	var entries []entry
	want := map[string]string{}
	for i, f := range []struct{ node, cpus string }{{"0", "0-3"}, {"1", "4-7"}, {"0", "0-3"}, {"-1", "0-7"}, {"1", "4-7"}} {
		bdf := fmt.Sprintf("0000:00:%02x.0", i+1)
		entries = append(entries, fn(bdf, f.node, f.cpus)...)
		want[bdf] = f.cpus
	}
	entries = append(entries, gpuEntries("0000:00:10.0", file("sys/devices/pci0000:00/0000:00:10.0/local_cpulist", "0-7\n"))...)
	want["0000:00:10.0"] = "0-7"
	dirFS, memFS := openBoth(t, entries)
	for name, fsys := range map[string]FS{"dir": dirFS, "snapshot": memFS} {
		recs, err := fsys.PCIRecords()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, r := range recs {
			got[r.Address.String()] = r.LocalCPUList
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: local_cpulist (-want +got):\n%s", name, diff)
		}
	}
}
