package pciids

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// TestLoadFor checks that a database loaded for a tree names its devices as the
// whole database does, while keeping only their vendors' blocks and the classes.
func TestLoadFor(t *testing.T) {
	recs := []pcie.Record{
		{Address: pcie.Address{Device: 1}, Path: "pci0000:00/0000:00:01.0", Vendor: 0x10de, Device: 0x2335,
			SubVendor: 0x10de, SubDevice: 0x18c0, Class: 0x030200},
		{Address: pcie.Address{Device: 2}, Path: "pci0000:00/0000:00:02.0", Vendor: 0x15b3, Device: 0x1021, Class: 0x020700},
		{Address: pcie.Address{Device: 3}, Path: "pci0000:00/0000:00:03.0", Vendor: 0x1234, Device: 0x5678, Class: 0x010802},
	}
	whole, part := pcie.NewTopology(recs), pcie.NewTopology(recs)
	Annotate(whole, loadTiny(t))
	db, err := LoadFor(nil, tinyDB, part)
	if err != nil {
		t.Fatal(err)
	}
	Annotate(part, db)
	type names struct{ Vendor, Device, Class, Subsystem string }
	get := func(top *pcie.Topology) (n []names) {
		for _, d := range top.Devices {
			n = append(n, names{d.VendorName, d.DeviceName, d.ClassName, d.SubsystemName})
		}
		return n
	}
	if diff := cmp.Diff(get(whole), get(part)); diff != "" {
		t.Errorf("names from LoadFor (-Load +LoadFor):\n%s", diff)
	}
	if got := get(part)[0].Subsystem; got != "H200 NVL" {
		t.Errorf("subsystem = %q, want H200 NVL", got)
	}
	if got := db.Vendor(0x8086); got != "" {
		t.Errorf("Vendor(8086) of a tree without Intel = %q, want \"\"", got)
	}
	var kept []uint16
	for v := range db.vendors {
		kept = append(kept, v)
	}
	slices.Sort(kept)
	if diff := cmp.Diff([]uint16{0x10de, 0x15b3}, kept); diff != "" {
		t.Errorf("vendors kept (-want +got):\n%s", diff)
	}
	if bytes.Contains(db.data, []byte("Intel")) || bytes.Contains(db.data, []byte("Broadcom")) {
		t.Errorf("kept the blocks of vendors the tree does not hold:\n%s", db.data)
	}
}

// TestLoadLongLines checks that a line is read up to the length pciutils reads and
// the database refused past it, as lspci refuses it, the last line too.
func TestLoadLongLines(t *testing.T) {
	name := strings.Repeat("x", maxLine-len("\t0001  "))
	for _, tt := range []struct {
		name, text string
		ok         bool
	}{
		{"longest line", "1000  Broadcom\n\t0001  " + name + "\n10de  NVIDIA\n", true},
		{"longest last line", "1000  Broadcom\n\t0001  " + name, true},
		{"a byte longer", "1000  Broadcom\n\t0001  " + name + "y\n10de  NVIDIA\n", false},
		{"a byte longer at the end", "1000  Broadcom\n\t0001  " + name + "y", false},
		{"longer than the read buffer", "1000  Broadcom\n\t0001  " + strings.Repeat("x", 2*scanBuffer) + "\n", false},
	} {
		p := filepath.Join(t.TempDir(), "pci.ids")
		if err := os.WriteFile(p, []byte(tt.text), 0o644); err != nil {
			t.Fatal(err)
		}
		db, err := Load(nil, p)
		if !tt.ok {
			if err == nil || !strings.Contains(err.Error(), "line 2: longer than") {
				t.Errorf("%s: error %v, want line 2 refused", tt.name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := db.Device(0x1000, 0x0001); got != name {
			t.Errorf("%s: device name of %d bytes, want %d", tt.name, len(got), len(name))
		}
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

// TestLoadForEdges checks the whole database and one kept for the devices asked
// about on the lines that findDevice treats specially.
func TestLoadForEdges(t *testing.T) {
	text := strings.Join([]string{
		"1000  First block of 1000",
		"\t0001  Gone with its block",
		"10de  NVIDIA",
		"\t2330\tSeparated by a tab, not a device line",
		"\t2330  H100",
		"\t2330  A second H100 line",
		"\t2335  H200",
		"# a comment inside the subsystems",
		"\t\t10de 18bf  H200 SXM",
		"",
		"\t\t10de 18c0  After a blank line: not H200's",
		"\t233A  Upper-case ID",
		"\t2336  CRLF line\r",
		"\t\t10de 0001  CRLF subsystem\r",
		"1000  Second block of 1000",
		"\tc030  Switch",
		"C 03  Display controller",
		"\t02  3D controller",
	}, "\n")
	p := filepath.Join(t.TempDir(), "pci.ids")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &filter{vendors: map[uint16]bool{0x1000: true, 0x10de: true}, devices: map[uint32]bool{}}
	for _, d := range []uint32{0x1000_0001, 0x1000_c030, 0x10de_2330, 0x10de_2335, 0x10de_233a, 0x10de_2336} {
		f.devices[d] = true
	}
	for _, want := range []*filter{nil, f} {
		db, err := load(nil, p, want)
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct{ what, got, want string }{
			{"the last block of a vendor listed twice", db.Vendor(0x1000), "Second block of 1000"},
			{"a device of its first block", db.Device(0x1000, 0x0001), ""},
			{"a device of its last block", db.Device(0x1000, 0xc030), "Switch"},
			{"the first line with a blank after the ID", db.Device(0x10de, 0x2330), "H100"},
			{"a subsystem after a comment", db.Subsystem(0x10de, 0x2335, 0x10de, 0x18bf), "H200 SXM"},
			{"a subsystem after a blank line", db.Subsystem(0x10de, 0x2335, 0x10de, 0x18c0), ""},
			{"an upper-case device ID", db.Device(0x10de, 0x233a), ""},
			{"a CRLF device line", db.Device(0x10de, 0x2336), "CRLF line"},
			{"a CRLF subsystem line", db.Subsystem(0x10de, 0x2336, 0x10de, 0x0001), "CRLF subsystem"},
			{"a class", db.Class(0x030200), "3D controller"},
		} {
			if tt.got != tt.want {
				t.Errorf("filter %v: %s: got %q, want %q", want != nil, tt.what, tt.got, tt.want)
			}
		}
	}
}

// TestLoadForSystem loads the host's pci.ids for a random tenth of its devices and
// checks every name of those devices (vendor, device, each subsystem listed under
// it) against the whole database, and that the rest are unknown to it.
func TestLoadForSystem(t *testing.T) {
	whole := systemDB(t)
	raw := whole.data
	type pair struct{ vendor, device uint16 }
	subs := map[pair][][2]uint16{}
	var pairs []pair
	var vendor, dev uint16
	for line := range bytes.Lines(raw[:whole.classes]) {
		switch {
		case len(line) > 6 && line[0] == '\t' && line[1] == '\t':
			sv, ok1 := hexID(line[2:6])
			sd, ok2 := hexID(line[7:min(11, len(line))])
			if ok1 && ok2 {
				p := pair{vendor, dev}
				subs[p] = append(subs[p], [2]uint16{uint16(sv), uint16(sd)})
			}
		case len(line) > 5 && line[0] == '\t':
			if d, ok := lowerHex4(line[1:]); ok {
				dev = d
				pairs = append(pairs, pair{vendor, dev})
			}
		case len(line) > 4 && line[0] != '#':
			if v, ok := hexID(line[:4]); ok {
				vendor = uint16(v)
			}
		}
	}
	if len(pairs) < 1000 {
		t.Fatalf("found %d devices in %s", len(pairs), whole.Path)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	f := &filter{vendors: map[uint16]bool{}, devices: map[uint32]bool{}}
	var chosen, other []pair
	for _, p := range pairs {
		if rng.IntN(10) == 0 {
			chosen = append(chosen, p)
			f.vendors[p.vendor] = true
			f.devices[uint32(p.vendor)<<16|uint32(p.device)] = true
		} else {
			other = append(other, p)
		}
	}
	part, err := load(nil, whole.Path, f)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range chosen {
		check := func(what, got, want string) {
			if got != want {
				t.Errorf("%04x:%04x %s: got %q, want %q", p.vendor, p.device, what, got, want)
			}
		}
		check("vendor", part.Vendor(p.vendor), whole.Vendor(p.vendor))
		check("device", part.Device(p.vendor, p.device), whole.Device(p.vendor, p.device))
		// Its own subsystems, itself, and another device's subsystems, which are not its.
		asked := append(subs[p], [2]uint16{p.vendor, p.device})
		if o := other[rng.IntN(len(other))]; len(subs[o]) > 0 {
			asked = append(asked, subs[o]...)
		}
		for _, s := range asked {
			check(fmt.Sprintf("subsystem %04x:%04x", s[0], s[1]),
				part.Subsystem(p.vendor, p.device, s[0], s[1]), whole.Subsystem(p.vendor, p.device, s[0], s[1]))
		}
	}
	for _, p := range other {
		if f.devices[uint32(p.vendor)<<16|uint32(p.device)] {
			continue // the same ID listed twice
		}
		if got := part.Device(p.vendor, p.device); got != "" {
			t.Errorf("%04x:%04x was not asked for but is named %q", p.vendor, p.device, got)
		}
	}
	if len(part.data) > len(raw)/5 {
		t.Errorf("kept %d of %d bytes for a tenth of the devices", len(part.data), len(raw))
	}
	t.Logf("%d of %d devices, %d of %d bytes kept", len(chosen), len(pairs), len(part.data), len(raw))
}

// BenchmarkLoadSystem measures reading the whole of the host's pci.ids.
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
		for v := range db.vendors {
			_ = db.Vendor(v)
			_ = db.Device(v, 0x2335)
			_ = db.Subsystem(v, 0x2335, 0x10de, 0x18bf)
		}
		_ = db.Class(0x030200)
		// A database kept for one vendor answers for it as the whole one does.
		for v := range db.vendors {
			one, err := load(nil, p, &filter{vendors: map[uint16]bool{v: true}, devices: map[uint32]bool{uint32(v)<<16 | 0x2335: true}})
			if err != nil {
				t.Fatalf("whole database loads, one vendor's fails: %v", err)
			}
			for _, got := range [][2]string{
				{db.Vendor(v), one.Vendor(v)},
				{db.Device(v, 0x2335), one.Device(v, 0x2335)},
				{db.Subsystem(v, 0x2335, 0x10de, 0x18bf), one.Subsystem(v, 0x2335, 0x10de, 0x18bf)},
				{db.Class(0x030200), one.Class(0x030200)},
			} {
				if got[0] != got[1] {
					t.Fatalf("vendor %04x: whole database %q, one vendor's %q", v, got[0], got[1])
				}
			}
			break
		}
	})
}

// BenchmarkLoadForSystem measures what p2pcheck pays per run on a node of a few
// vendors: the host's pci.ids read for five devices.
func BenchmarkLoadForSystem(b *testing.B) {
	p := systemDB(b).Path
	f := &filter{vendors: map[uint16]bool{0x10de: true, 0x8086: true, 0x15b3: true, 0x1000: true, 0x1a03: true},
		devices: map[uint32]bool{0x10de_2335: true, 0x8086_0d57: true, 0x15b3_1021: true, 0x1000_c030: true, 0x1a03_2000: true}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := load(nil, p, f); err != nil {
			b.Fatal(err)
		}
	}
}
