package pciids

import (
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/pcie"
)

const tinyDB = "testdata/pci.ids"

func loadTiny(t testing.TB) *DB {
	t.Helper()
	db, err := Load(nil, tinyDB)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func TestLookups(t *testing.T) {
	db := loadTiny(t)
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"vendor", db.Vendor(0x10de), "NVIDIA Corporation"},
		{"unknown vendor", db.Vendor(0x1234), ""},
		{"device", db.Device(0x10de, 0x2335), "GH100 [H200 SXM 141GB]"},
		{"device of another vendor", db.Device(0x15b3, 0x2335), ""},
		{"subsystem", db.Subsystem(0x10de, 0x2335, 0x10de, 0x18bf), "H200 SXM 141GB"},
		{"second subsystem", db.Subsystem(0x10de, 0x2335, 0x10de, 0x18c0), "H200 NVL"},
		{"unknown subsystem", db.Subsystem(0x10de, 0x2335, 0x10de, 0x0001), ""},
		{"subsystem of unknown device", db.Subsystem(0x10de, 0x9999, 0x10de, 0x18bf), ""},
		{"first vendor's subsystem", db.Subsystem(0x1000, 0xc030, 0x1000, 0x100b), "PEX89144 PCIe Gen 5 Switch"},
		{"subclass", db.Class(0x030200), "3D controller"},
		{"subclass with prog-if", db.Class(0x010802), "Non-Volatile memory controller"},
		{"unknown subclass gives the class and code", db.Class(0x068000), "Bridge [0680]"},
		// A base class is never confused with the subclass whose key it once shared.
		{"class 01 beside subclass 02/00", db.Class(0x01ff00), "Mass storage controller [01ff]"},
		{"class 02 beside subclass 03/00", db.Class(0x028000), "Network controller [0280]"},
		{"unknown class", db.Class(0x420000), "Class 4200"},
		{"unassigned", db.Class(0xffff00), "Unassigned class [ffff]"},
		{"subsystem equal to the device", db.Subsystem(0x10de, 0x2335, 0x10de, 0x2335), "GH100 [H200 SXM 141GB]"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	if db.Path != tinyDB {
		t.Errorf("Path = %q, want %q", db.Path, tinyDB)
	}
}

func TestLoadErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "pci.ids")
	if _, err := Load(nil, missing); !errors.Is(err, ErrNoDatabase) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(nil, missing) error = %v, want ErrNoDatabase and ErrNotExist", err)
	}
	db, err := Load(nil, "testdata/malformed.ids")
	if err == nil || errors.Is(err, ErrNoDatabase) {
		t.Errorf("Load(nil, malformed) = %v, %v; want a parse error", db, err)
	}
}

func TestLoadGzip(t *testing.T) {
	raw, err := os.ReadFile(tinyDB)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "pci.ids.gz")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	if _, err := zw.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := Load(nil, p)
	if err != nil {
		t.Fatal(err)
	}
	if got := db.Vendor(0x15b3); got != "Mellanox Technologies" {
		t.Errorf("Vendor from gzip'd file = %q", got)
	}
}

func TestAnnotate(t *testing.T) {
	cfg := make([]byte, pcie.ConfigHeaderSize)
	cfg[0], cfg[1], cfg[2], cfg[3] = 0xde, 0x10, 0x35, 0x23 // 10de:2335
	cfg[0x0b], cfg[0x0a] = 0x03, 0x02
	recs := []pcie.Record{
		{Address: pcie.Address{Device: 6}, Path: "pci0000:00/0000:00:06.0", Vendor: 0x10de, Device: 0x2335,
			SubVendor: 0x10de, SubDevice: 0x18bf, Class: 0x030200, Config: cfg},
		{Address: pcie.Address{Device: 3}, Path: "pci0000:00/0000:00:03.0", Vendor: 0x1af4, Device: 0x1041,
			SubVendor: 0x1af4, SubDevice: 0x0001, Class: 0x020000},
		{Address: pcie.Address{Device: 9}, Path: "pci0000:00/0000:00:09.0", Vendor: 0x1234, Device: 0x5678, Class: 0xff0000},
	}
	top := pcie.NewTopology(recs)
	Annotate(top, nil) // no database: nothing happens
	if top.Devices[0].VendorName != "" {
		t.Fatalf("Annotate(nil) set %q", top.Devices[0].VendorName)
	}
	Annotate(top, loadTiny(t))
	type names struct{ Vendor, Device, Class, Subsystem string }
	var got []names
	for _, d := range top.Devices {
		got = append(got, names{d.VendorName, d.DeviceName, d.ClassName, d.SubsystemName})
	}
	want := []names{
		{"Red Hat, Inc.", "Virtio 1.0 network device", "Ethernet controller", ""},
		{"NVIDIA Corporation", "GH100 [H200 SXM 141GB]", "3D controller", "H200 SXM 141GB"},
		{"", "", "Unassigned class [ff00]", ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
}

// systemDB loads the host's pci.ids or skips.
func systemDB(tb testing.TB) *DB {
	tb.Helper()
	db, err := Load(nil, "")
	if errors.Is(err, ErrNoDatabase) {
		tb.Skip("no pci.ids on this host (install pciutils or hwdata)")
	}
	if err != nil {
		tb.Fatal(err)
	}
	return db
}

func TestSystemDatabase(t *testing.T) {
	db := systemDB(t)
	for _, tt := range []struct{ got, want string }{
		{db.Vendor(0x10de), "NVIDIA Corporation"},
		{db.Vendor(0x8086), "Intel Corporation"},
		{db.Class(0x060400), "PCI bridge"},
		{db.Class(0x030200), "3D controller"},
		// lspci's names for codes the first index confused (pciutils lib/names.c
		// pci_lookup_name, PCI_LOOKUP_CLASS).
		{db.Class(0x00ff00), "Unclassified device [00ff]"},
		{db.Class(0x0b8000), "Processor [0b80]"},
		{db.Class(0x128000), "Processing accelerators [1280]"},
		{db.Class(0x02ff00), "Network controller [02ff]"},
		{db.Class(0x410000), "Class 4100"},
		{db.Class(0xfe0000), "Class fe00"},
		{db.Class(0xffff00), "Unassigned class [ffff]"},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", db.Path, tt.got, tt.want)
		}
	}
}

// BenchmarkLoadSystem measures parsing the host's pci.ids, which p2pcheck topo
// pays once per run.
func BenchmarkLoadSystem(b *testing.B) {
	p := systemDB(b).Path
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(nil, p); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzLoad feeds arbitrary databases to the indexer and the lazy parsers: no
// input may panic, and whatever loads must answer lookups.
func FuzzLoad(f *testing.F) {
	for _, p := range []string{tinyDB, "testdata/malformed.ids"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "pci.ids")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		db, err := Load(nil, p)
		if err != nil {
			return
		}
		for v, off := range db.vendors {
			if off != 0 {
				_ = db.Vendor(uint16(v))
				_ = db.Device(uint16(v), 0x2335)
				_ = db.Subsystem(uint16(v), 0x2335, 0x10de, 0x18bf)
			}
		}
		_ = db.Class(0x030200)
	})
}
