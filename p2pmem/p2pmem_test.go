package p2pmem

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/p2pkit/p2pkit/pcie"
)

// fakeProvider writes a device directory with a p2pmem group below root, laid out as
// sysfs lays it out. With allocate, a regular file of allocSize bytes stands in for
// the kernel's p2pmem/allocate bin attribute (mapping a regular file succeeds the same
// way; only the kernel's pool accounting is missing).
func fakeProvider(tb testing.TB, root, bdf string, published string, allocate bool, allocSize int64) string {
	tb.Helper()
	dir := filepath.Join(root, "sys", "bus", "pci", "devices", bdf)
	group := filepath.Join(dir, "p2pmem")
	if err := os.MkdirAll(group, 0o755); err != nil {
		tb.Fatal(err)
	}
	for name, v := range map[string]string{"size": "67108864\n", "available": "66060288\n", "published": published + "\n"} {
		if err := os.WriteFile(filepath.Join(group, name), []byte(v), 0o444); err != nil {
			tb.Fatal(err)
		}
	}
	if allocate {
		f, err := os.OpenFile(filepath.Join(group, "allocate"), os.O_CREATE|os.O_RDWR, 0o660)
		if err != nil {
			tb.Fatal(err)
		}
		if err := f.Truncate(allocSize); err != nil {
			tb.Fatal(err)
		}
		f.Close()
	}
	return dir
}

func TestOpen(t *testing.T) {
	root := t.TempDir()
	dir := fakeProvider(t, root, "0000:03:00.0", "1", true, 1<<20)
	p, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := Provider{dir: dir, Size: 64 << 20, Available: 63 << 20, Published: true}
	if diff := cmp.Diff(want, *p, cmp.AllowUnexported(Provider{})); diff != "" {
		t.Errorf("Open (-want +got):\n%s", diff)
	}
	a, _ := pcie.ParseAddress("0000:03:00.0")
	p2, err := OpenAddress(root, a)
	if err != nil || p2.Dir() != dir {
		t.Errorf("OpenAddress = %v, %v; want the provider at %s", p2, err, dir)
	}

	unpub := fakeProvider(t, root, "0000:04:00.0", "0", true, 1<<20)
	if p, err := Open(unpub); err != nil || p.Published {
		t.Errorf("Open(unpublished) = %+v, %v; want an unpublished provider", p, err)
	}
}

func TestOpenErrors(t *testing.T) {
	root := t.TempDir()
	plain := filepath.Join(root, "sys", "bus", "pci", "devices", "0000:05:00.0")
	if err := os.MkdirAll(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	old := fakeProvider(t, root, "0000:06:00.0", "1", false, 0)
	bad := fakeProvider(t, root, "0000:07:00.0", "1", true, 0)
	if err := os.WriteFile(filepath.Join(bad, "p2pmem", "size"), []byte("lots\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		dir  string
		want error
	}{
		{name: "no such device", dir: filepath.Join(root, "nope"), want: fs.ErrNotExist},
		{name: "not a provider", dir: plain, want: ErrNotProvider},
		{name: "kernel before 6.2", dir: old, want: ErrKernelTooOld},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Open(tt.dir)
			if !errors.Is(err, tt.want) {
				t.Errorf("Open error = %v; want %v", err, tt.want)
			}
		})
	}
	if _, err := Open(bad); err == nil {
		t.Error("Open with an unparsable size succeeded")
	}
}
