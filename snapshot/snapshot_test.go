package snapshot_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/roottest"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/procfs"
	"github.com/p2pkit/p2pkit/snapshot"
	"github.com/p2pkit/p2pkit/sysfs"
)

func TestReadSnapshotHostile(t *testing.T) {
	many := make([]entry, 101)
	for i := range many {
		many[i] = directory(fmt.Sprintf("d%d/", i))
	}
	small := hostfs.DefaultBudget
	small.Members, small.MemberSize, small.Data = 100, 1<<10, 4<<10
	tests := []struct {
		name    string
		archive []byte
		wantErr string
	}{
		{"huge member", tarGz(t, []entry{file("big", strings.Repeat("x", 1025))}), "more than 1024 bytes in one file (this one has 1025) (Budget.MemberSize)"},
		{"too many members", tarGz(t, many), "more than 100 files, links and directories (Budget.Members)"},
		{"too much data", tarGz(t, []entry{file("1", strings.Repeat("x", 1024)), file("2", strings.Repeat("x", 1024)),
			file("3", strings.Repeat("x", 1024)), file("4", strings.Repeat("x", 1024)), file("5", "x")}), "more than 4096 bytes of file data (Budget.Data)"},
		{"absolute name", tarGz(t, []entry{file("/etc/passwd", "x")}), `"/etc/passwd": absolute name`},
		{"traversal", tarGz(t, []entry{file("sys/../../etc/passwd", "x")}), "leads outside"},
		{"dot-dot only", tarGz(t, []entry{file("..", "x")}), "leads outside"},
		{"unclean name", tarGz(t, []entry{file("sys//x", "x")}), "not clean"},
		{"hard link", tarGz(t, []entry{file("a", "x"), {Name: "b", Type: tar.TypeLink, Target: "a"}}), "unsupported member type"},
		{"fifo", tarGz(t, []entry{{Name: "p", Type: tar.TypeFifo}}), "unsupported member type"},
		{"empty link", tarGz(t, []entry{{Name: "l", Type: tar.TypeSymlink}}), "without a target"},
		{"file under file", tarGz(t, []entry{file("a", "x"), file("a/b", "y")}), "not a directory"},
		{"dir replaces file", tarGz(t, []entry{file("a", "x"), directory("a/")}), "share the name"},
		{"file replaces dir", tarGz(t, []entry{directory("a/"), file("a", "x")}), "share the name"},
		{"root as file", tarGz(t, []entry{file(".", "x")}), "root must be a directory"},
		{"not gzip", []byte("plain text"), "gzip"},
		{"truncated", tarGz(t, []entry{file("a", strings.Repeat("x", 4096))})[:60], "snapshot: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := snapshot.ReadBudget(bytes.NewReader(tt.archive), small)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "snapshot: ") {
				t.Errorf("err = %v, want a sysfs error containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestReadSnapshotDefaultLimits checks the documented limits and that a member
// declared larger than the default limit is refused before its data is read.
func TestReadSnapshotDefaultLimits(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: "big", Typeflag: tar.TypeReg, Size: 1 << 40, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	_, err := snapshot.Read(&buf)
	if err == nil || !strings.Contains(err.Error(), `member "big": over budget: more than 4194304 bytes in one file (this one has 1099511627776)`) || !errors.Is(err, hostfs.ErrBudget) {
		t.Errorf("err = %v, want the member size limit", err)
	}
}

func TestReadSnapshotDuplicates(t *testing.T) {
	fsys, err := snapshot.Read(bytes.NewReader(tarGz(t, []entry{
		file("./proc/cmdline", "first\n"),
		directory("./proc/"),
		file("proc/cmdline", "second\n"),
		{Name: "proc/", Type: tar.TypeDir, Mode: 0o700},
	})))
	if err != nil {
		t.Fatal(err)
	}
	c, err := procfs.New(fsys).Cmdline()
	if err != nil || c.Raw != "second" {
		t.Errorf("Cmdline = %q, %v; want the later member", c.Raw, err)
	}
	fi, err := fsys.Lstat("proc")
	if err != nil || fi.Mode != fs.ModeDir|0o700 {
		t.Errorf("proc mode = %v, %v; want the later directory's", fi.Mode, err)
	}
}

func TestOpenMissing(t *testing.T) {
	if _, err := snapshot.Open(filepath.Join(t.TempDir(), "none.tar.gz")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing snapshot: err = %v, want fs.ErrNotExist", err)
	}
}

// TestSnapshotRoundTrip captures the unpacked H200 tree and reads the capture back:
// records and platform facts are unchanged, and capturing the capture gives the same
// bytes.
func TestSnapshotRoundTrip(t *testing.T) {
	root := roottest.Extract(t, h200Snapshot)
	addRoundTripFiles(t, root)
	src, err := hostfs.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var first bytes.Buffer
	sum, err := snapshot.Write(src, &first)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Skipped) != 0 || sum.Members == 0 {
		t.Errorf("summary = %+v", sum)
	}
	snap, err := snapshot.Read(bytes.NewReader(first.Bytes()))
	if err != nil {
		t.Fatal(err)
	}

	compareRecords(t, src, snap)
	comparePlatform(t, src, snap)
	checkNeverCaptured(t, snap)
	var second bytes.Buffer
	if _, err := snapshot.Write(snap, &second); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Error("capturing the capture gives different bytes")
	}
}

// addRoundTripFiles adds to the unpacked tree at root what the original capture
// lacks, and files a capture must not read.
func addRoundTripFiles(t *testing.T, root string) {
	t.Helper()
	// Add what the original capture lacks, and files a capture must not read.
	gpu := filepath.Join(root, "sys/devices/pci0000:00/0000:00:06.0")
	for name, data := range map[string]string{
		"proc/version":                                         "Linux version 6.18.0 (nixbld@localhost) #1-NixOS SMP\n",
		"boot/config-6.18.0":                                   "CONFIG_PCI_P2PDMA=y\n",
		"sys/kernel/iommu_groups/3/type":                       "identity\n",
		"sys/kernel/mm/memory_peers/nv_mem/version":            "1.3\n",
		"sys/devices/pci0000:00/0000:00:06.0/resource1":        "BAR",
		"sys/devices/pci0000:00/0000:00:06.0/resource1_wc":     "BAR",
		"sys/devices/pci0000:00/0000:00:06.0/rom":              "ROM",
		"sys/devices/pci0000:00/0000:00:06.0/p2pmem/size":      "1024\n",
		"sys/devices/pci0000:00/0000:00:06.0/p2pmem/available": "512\n",
		"sys/devices/pci0000:00/0000:00:06.0/p2pmem/published": "0\n",
		"sys/devices/pci0000:00/0000:00:06.0/p2pmem/allocate":  "must not be read",
	} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "sys/class/iommu"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../devices/virtual/iommu/dmar0", filepath.Join(root, "sys/class/iommu/dmar0")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gpu, "remove"), nil, 0o200); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(gpu, "net/eth0/statistics"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// compareRecords compares the PCI records read from src and from its capture
// snap.
func compareRecords(t *testing.T, src, snap hostfs.Root) {
	t.Helper()
	wantRecs, err := sysfs.New(src).PCIRecords()
	if err != nil {
		t.Fatal(err)
	}
	gotRecs, err := sysfs.New(snap).PCIRecords()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantRecs, gotRecs); diff != "" {
		t.Errorf("records after the round trip (-dir +snapshot):\n%s", diff)
	}
	if p := gotRecs[6].P2PMem; p == nil || !p.Allocate || p.Size != 1024 {
		t.Errorf("p2pmem = %+v, want size 1024 and allocate present", p)
	}
	if diff := cmp.Diff([]string{"eth0"}, gotRecs[6].NetDevs); diff != "" {
		t.Errorf("net devices (-want +got):\n%s", diff)
	}
	// The driver link's target directory is captured (empty), so that a reader
	// resolving the link with realpath, as lspci does, finds it.
	if fi, err := snap.Lstat("sys/bus/pci/drivers/nvidia"); err != nil || !fi.Mode.IsDir() {
		t.Errorf("sys/bus/pci/drivers/nvidia in the snapshot: %v, %v; want a directory", fi, err)
	}
}

// comparePlatform compares the platform facts read from src and from snap.
func comparePlatform(t *testing.T, src, snap hostfs.Root) {
	t.Helper()
	wantPlat, err := node.ReadPlatform(src)
	if err != nil {
		t.Fatal(err)
	}
	gotPlat, err := node.ReadPlatform(snap)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantPlat, gotPlat); diff != "" {
		t.Errorf("platform after the round trip (-dir +snapshot):\n%s", diff)
	}
	if len(gotPlat.IOMMUGroups) != 1 || len(gotPlat.IOMMUUnits) != 1 || gotPlat.MemoryPeers["nv_mem"] != "1.3" ||
		gotPlat.KernelConfig.Value("CONFIG_PCI_P2PDMA") != procfs.ConfigYes {
		t.Errorf("platform after the round trip lacks items: %+v", gotPlat)
	}
}

// checkNeverCaptured: BARs, the ROM, writable files and serial numbers are not
// in snap; p2pmem/allocate and net directories are, empty.
func checkNeverCaptured(t *testing.T, snap hostfs.Root) {
	t.Helper()
	for _, never := range []string{"resource1", "resource1_wc", "rom", "remove", "serial_number"} {
		if _, err := snap.Lstat("sys/devices/pci0000:00/0000:00:06.0/" + never); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("capture holds %s (err %v)", never, err)
		}
	}
	if b, err := snap.ReadFile("sys/devices/pci0000:00/0000:00:06.0/p2pmem/allocate", 4096); err != nil || len(b) != 0 {
		t.Errorf("p2pmem/allocate = %q, %v; want present and empty", b, err)
	}
	if names, err := snap.Names("sys/devices/pci0000:00/0000:00:06.0/net/eth0"); err != nil || len(names) != 0 {
		t.Errorf("net/eth0 holds %v, %v; want an empty directory", names, err)
	}
}

// TestWriteSnapshotSkips checks that a file that cannot be read is left out and
// reported while the capture goes on.
func TestWriteSnapshotSkips(t *testing.T) {
	root := roottest.Extract(t, h200Snapshot)
	gpu := "sys/devices/pci0000:00/0000:00:06.0/"
	// Longer than any sysfs attribute can be.
	if err := os.WriteFile(filepath.Join(root, gpu+"modalias"), make([]byte, 64<<10+1), 0o644); err != nil {
		t.Fatal(err)
	}
	wantSkipped := []string{"/" + gpu + "modalias"}
	if os.Getuid() != 0 { // root reads files whatever their mode
		if err := os.Chmod(filepath.Join(root, gpu+"config"), 0o200); err != nil {
			t.Fatal(err)
		}
		wantSkipped = append([]string{"/" + gpu + "config"}, wantSkipped...)
	}
	src, err := hostfs.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var buf bytes.Buffer
	sum, err := snapshot.Write(src, &buf)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range sum.Skipped {
		var pe *fs.PathError
		if !errors.As(e, &pe) {
			t.Fatalf("skipped error %v names no path", e)
		}
		got = append(got, pe.Path)
	}
	if diff := cmp.Diff(wantSkipped, got); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	snap, err := snapshot.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := sysfs.New(snap).PCIRecords()
	if err != nil || len(recs) != 8 || recs[7].Err != nil {
		t.Errorf("capture with a skipped file: %d records, err %v", len(recs), err)
	}
}

func TestWriteSnapshotDevNode(t *testing.T) {
	src, err := snapshot.Read(bytes.NewReader(tarGz(t, []entry{
		charDev("dev/gdrdrv", 509, 0),
		charDev("dev/nvidia0", 195, 0),
		charDev("dev/sda", 8, 0),
		file("proc/devices", "Character devices:\n509 gdrdrv\n"),
	})))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := snapshot.Write(src, &buf); err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	n, err := procfs.New(snap).DevNode("gdrdrv")
	want := procfs.DevNode{Mode: fs.ModeDevice | fs.ModeCharDevice | 0o666, Major: 509, NumberKnown: true}
	if err != nil || n != want {
		t.Errorf("DevNode(gdrdrv) = %+v, %v; want %+v", n, err, want)
	}
	if _, err := procfs.New(snap).DevNode("nvidia0"); err != nil {
		t.Errorf("DevNode(nvidia0): %v", err)
	}
	if _, err := procfs.New(snap).DevNode("sda"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("capture holds /dev/sda (err %v)", err)
	}
}

// FuzzReadSnapshot loads archives built from a compact description, one member per
// line: a type letter (f file, d directory, l link, c character device, h hard link),
// a blank, the name, and for files and links a blank and the contents or target
// ("\n" in contents is written "\\n"). Keeping inputs small keeps the fuzzer's
// minimisation fast; archive/tar itself is the standard library's to fuzz.
func FuzzReadSnapshot(f *testing.F) {
	f.Add("l sys/bus/pci/devices/0000:00:06.0 ../../../devices/pci0000:00/0000:00:06.0\n" +
		"f sys/devices/pci0000:00/0000:00:06.0/vendor 0x10de\n" +
		"f sys/devices/pci0000:00/0000:00:06.0/device 0x2335\n" +
		"f sys/devices/pci0000:00/0000:00:06.0/class 0x030200\n" +
		"f sys/devices/pci0000:00/0000:00:06.0/config \x00\x01\n" +
		"l sys/devices/pci0000:00/0000:00:06.0/driver ../../../bus/pci/drivers/nvidia\n" +
		"l sys/devices/pci0000:00/0000:00:06.0/virtfn0 ../0000:00:06.1\n" +
		"d sys/devices/pci0000:00/0000:00:06.0/p2pmem\n" +
		"f sys/devices/pci0000:00/0000:00:06.0/p2pmem/size 4096\n" +
		"f sys/kernel/iommu_groups/1/type DMA\n" +
		"f proc/cpuinfo processor\t: 0\\nvendor_id\t: AuthenticAMD\\ncpu family\t: 25\n" +
		"f proc/version Linux version 6.1.0 (x) #1\n" +
		"c dev/gdrdrv\n")
	f.Add("l sys/bus/pci/devices/0000:00:01.0 ../../../../../etc\nl sys/a b\nl sys/b a\nf ../x y\n")
	f.Add("d ./\nf /abs x\nh sys/h sys/a\nl sys/devices/x /etc\nf sys//y z\n")
	f.Fuzz(func(t *testing.T, spec string) {
		var buf bytes.Buffer
		// Stored, not compressed: compressing costs most of an execution and is not
		// what the reader is fuzzed for.
		zw, _ := gzip.NewWriterLevel(&buf, gzip.NoCompression)
		tw := tar.NewWriter(zw)
		for line := range strings.Lines(spec) {
			typ, rest, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
			name, arg, _ := strings.Cut(rest, " ")
			hdr := &tar.Header{Name: name, Mode: 0o644}
			switch typ {
			case "f":
				arg = strings.ReplaceAll(arg, `\n`, "\n")
				hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(arg))
			case "d":
				hdr.Typeflag = tar.TypeDir
			case "l":
				hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, arg
			case "h":
				hdr.Typeflag, hdr.Linkname = tar.TypeLink, arg
			case "c":
				hdr.Typeflag, hdr.Devmajor = tar.TypeChar, 509
			default:
				continue
			}
			if tw.WriteHeader(hdr) != nil {
				return // a header tar cannot encode
			}
			if hdr.Typeflag == tar.TypeReg {
				io.WriteString(tw, arg)
			}
		}
		tw.Close()
		zw.Close()
		fsys, err := snapshot.Read(&buf)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "snapshot: ") {
				t.Fatalf("error without the package prefix: %v", err)
			}
			return
		}
		// Whatever loaded must read, and capture again, without panicking. A
		// snapshot without /sys/bus/pci/devices fails PCIRecords: nothing to check.
		recs, _ := sysfs.New(fsys).PCIRecords()
		for _, r := range recs {
			if strings.HasPrefix(r.Path, "/") || slices.Contains(strings.Split(r.Path, "/"), "..") {
				t.Fatalf("record path %q leaves /sys/devices", r.Path)
			}
		}
		_, _ = node.ReadPlatform(fsys)
		var out bytes.Buffer
		if _, err := snapshot.Write(fsys, &out); err != nil {
			t.Fatal(err)
		}
		if _, err := snapshot.Read(&out); err != nil {
			t.Fatalf("a capture does not load: %v", err)
		}
	})
}

// TestRedaction captures a tree with a Device Serial Number capability, vpd and
// serial_number files and the host name in the kernel command line: by default the
// serial is zeroed, the files are left out and the name replaced as a word only, and
// the manifest says so; with NoRedact everything is kept.
func TestRedaction(t *testing.T) {
	cfg := make([]byte, 4096)
	copy(cfg, []byte{0xde, 0x10, 0x35, 0x23})
	cfg[0x06] = 0x10 // status: capability list
	cfg[0x34] = 0x40
	cfg[0x40], cfg[0x42] = 0x10, 0x02 // PCI Express, endpoint, no next
	// AER at 0x100, then DSN at 0x140 with serial 0x0102030405060708.
	copy(cfg[0x100:], []byte{0x01, 0x00, 0x01, 0x14})
	copy(cfg[0x140:], []byte{0x03, 0x00, 0x01, 0x00, 1, 2, 3, 4, 5, 6, 7, 8})
	dev := "sys/devices/pci0000:00/0000:00:01.0/"
	entries := []entry{
		symlink("sys/bus/pci/devices/0000:00:01.0", "../../../devices/pci0000:00/0000:00:01.0"),
		file(dev+"config", string(cfg)),
		file(dev+"vpd", "PN serial"),
		file(dev+"serial_number", "01-02-03-04-05-06-07-08\n"),
		file(dev+"vendor", "0x10de\n"),
		file("proc/cmdline", "ip=::::gpu-node-7:eth0 console=gpu-node-7x\n"),
		file("proc/sys/kernel/hostname", "gpu-node-7\n"),
	}
	fsys, err := snapshot.Read(bytes.NewReader(tarGz(t, entries)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		opt      snapshot.Options
		serial   []byte
		files    bool
		cmdline  string
		manifest snapshot.Manifest
	}{
		{snapshot.Options{}, make([]byte, 8), false, "ip=::::redacted-hostname:eth0 console=gpu-node-7x\n",
			snapshot.Manifest{Redacted: []string{"device_serial_number", "vpd", "serial_number", "hostname"}}},
		{snapshot.Options{NoRedact: true}, []byte{1, 2, 3, 4, 5, 6, 7, 8}, true, "ip=::::gpu-node-7:eth0 console=gpu-node-7x\n",
			snapshot.Manifest{Redacted: []string{}, Hostname: "gpu-node-7"}},
	} {
		var buf bytes.Buffer
		sum, err := snapshot.WriteOptions(fsys, &buf, tt.opt)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := snapshot.Read(&buf)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := snap.ReadFile(dev+"config", 4096)
		if !bytes.Equal(b[0x144:0x14c], tt.serial) || len(b) != 4096 {
			t.Errorf("%+v: serial % x, want % x", tt.opt, b[0x144:0x14c], tt.serial)
		}
		for _, f := range []string{"vpd", "serial_number"} {
			if _, err := snap.ReadFile(dev+f, 4096); (err == nil) != tt.files {
				t.Errorf("%+v: %s captured: %v", tt.opt, f, err == nil)
			}
		}
		if b, _ := snap.ReadFile("proc/cmdline", 4096); string(b) != tt.cmdline {
			t.Errorf("%+v: cmdline %q, want %q", tt.opt, b, tt.cmdline)
		}
		m, err := snapshot.ReadManifest(snap)
		if err != nil || m == nil {
			t.Fatalf("manifest: %v, %v", m, err)
		}
		if diff := cmp.Diff(tt.manifest, *m); diff != "" {
			t.Errorf("%+v: manifest (-want +got):\n%s", tt.opt, diff)
		}
		if diff := cmp.Diff(tt.manifest, sum.Manifest); diff != "" {
			t.Errorf("%+v: summary's manifest (-want +got):\n%s", tt.opt, diff)
		}
	}
}
