package image

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBuildUnpack: the archive holds one image per architecture with the
// binary and pci.ids at their paths and modes, tagged with the version.
func TestBuildUnpack(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	o := Options{
		Binaries:   map[string]string{"amd64": write("p2pcheck-amd64", "amd64 binary"), "arm64": write("p2pcheck-arm64", "arm64 binary")},
		PCIIDs:     write("pci.ids", "10de  NVIDIA Corporation\n"),
		Version:    "v0.3.0",
		Repository: "ghcr.io/p2pkit/p2pcheck",
	}
	idx, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "image.tar")
	if err := WriteArchive(archive, idx, o.Repository, o.Version); err != nil {
		t.Fatal(err)
	}
	for _, arch := range []string{"amd64", "arm64"} {
		root := filepath.Join(dir, arch)
		tag, err := Unpack(archive, arch, root)
		if err != nil {
			t.Fatal(err)
		}
		if tag != "v0.3.0" {
			t.Errorf("tag %q, want v0.3.0", tag)
		}
		got := map[string]string{}
		err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			fi, _ := d.Info()
			rel, _ := filepath.Rel(root, p)
			got[rel] = fi.Mode().String() + " " + string(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			BinaryPath: "-rwxr-xr-x " + arch + " binary",
			PCIIDsPath: "-rw-r--r-- 10de  NVIDIA Corporation\n",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s file system (-want +got):\n%s", arch, diff)
		}
	}
	if _, err := Unpack(archive, "riscv64", filepath.Join(dir, "riscv64")); err == nil || !strings.Contains(err.Error(), "no linux/riscv64 image") {
		t.Errorf("riscv64: %v, want no such image", err)
	}
}

// TestReproducible: the same inputs make the same image, byte for byte.
func TestReproducible(t *testing.T) {
	dir := t.TempDir()
	bin, ids := filepath.Join(dir, "bin"), filepath.Join(dir, "pci.ids")
	for _, p := range []string{bin, ids} {
		if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var digests []string
	for range 2 {
		idx, err := Build(Options{Binaries: map[string]string{"amd64": bin}, PCIIDs: ids, Version: "v1.0.0", Repository: "r"})
		if err != nil {
			t.Fatal(err)
		}
		d, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d.String())
	}
	if digests[0] != digests[1] {
		t.Errorf("digests differ: %q", digests)
	}
}

// TestExtractRefuses: a member that leaves the destination, or is a link or
// a device, is refused.
func TestExtractRefuses(t *testing.T) {
	for _, h := range []tar.Header{
		{Name: "../escape", Typeflag: tar.TypeReg},
		{Name: "/abs/../../escape", Typeflag: tar.TypeReg},
		{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"},
		{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3},
	} {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		tw.Close()
		dest := t.TempDir()
		if err := extract(tar.NewReader(&b), dest); err == nil {
			t.Errorf("%q (type %q) extracted", h.Name, h.Typeflag)
		}
	}
}
