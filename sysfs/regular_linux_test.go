package sysfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/p2pkit/p2pkit/hostfs"
)

// TestSpecialFilesRefused puts a FIFO, a character device (when mknod is allowed)
// and a socket where a function's attributes belong, in a --root tree: each is
// refused as not a regular file, before it is opened, and the rest is still read.
// A FIFO that were opened without O_NONBLOCK would hang the test.
func TestSpecialFilesRefused(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "sys/devices/pci0000:00/0000:00:01.0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "sys/bus/pci/devices")
	if err := os.MkdirAll(link, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../devices/pci0000:00/0000:00:01.0", filepath.Join(link, "0000:00:01.0")); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"vendor": "0x10de\n", "device": "0x2335\n", "class": "0x030200\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	special := map[string]string{"config": "FIFO", "numa_node": "socket"}
	if err := syscall.Mkfifo(filepath.Join(dir, "config"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mknod(filepath.Join(dir, "numa_node"), syscall.S_IFSOCK|0o644, 0); err != nil {
		t.Fatal(err)
	}
	// /dev/null's number: reading it would return nothing, not hang; it stands
	// for a device whose open has effects.
	if err := syscall.Mknod(filepath.Join(dir, "resource"), syscall.S_IFCHR|0o644, 1<<8|3); err == nil {
		special["resource"] = "character device"
	} else if !errors.Is(err, syscall.EPERM) {
		t.Fatal(err)
	}
	fsys, err := openDirFS(root)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	for name, typ := range special {
		_, err := fsys.r.ReadFile(join("sys/devices/pci0000:00/0000:00:01.0", name), attrLimit)
		if !errors.Is(err, hostfs.ErrNotFile) || !strings.Contains(err.Error(), typ) {
			t.Errorf("%s: err = %v, want not a regular file (%s)", name, err, typ)
		}
	}
	recs, err := fsys.PCIRecords()
	if err != nil || len(recs) != 1 {
		t.Fatalf("PCIRecords = %v, %v", recs, err)
	}
	r := recs[0]
	if r.Vendor != 0x10de || r.Class != 0x030200 || !errors.Is(r.Err, hostfs.ErrNotFile) {
		t.Errorf("record = %04x %06x, err %v; want the IDs read and the special file refused", r.Vendor, r.Class, r.Err)
	}
}
