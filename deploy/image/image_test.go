package image

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	specsv1 "github.com/opencontainers/image-spec/specs-go/v1"
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

// testOptions are the options of a small image of two platforms whose files
// are in dir.
func testOptions(t *testing.T, dir string) Options {
	t.Helper()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return Options{
		Binaries:   map[string]string{"amd64": write("p2pcheck-amd64", "amd64 binary"), "arm64": write("p2pcheck-arm64", "arm64 binary")},
		PCIIDs:     write("pci.ids", "10de  NVIDIA Corporation\n"),
		Version:    "v0.3.0",
		Repository: "ghcr.io/p2pkit/p2pcheck",
		Revision:   "0123456789abcdef0123456789abcdef01234567",
		Created:    time.Date(2026, 11, 30, 12, 34, 56, 0, time.FixedZone("CET", 3600)),
	}
}

// TestIndexAsContainersImageWritesIt: the index is what containers/image
// (skopeo) writes when it decodes and encodes an index with the OCI
// image-spec's types, byte for byte, so skopeo pushes it with the digest it
// was built with: no "artifactType", "digest" before "size".
func TestIndexAsContainersImageWritesIt(t *testing.T) {
	idx, err := Build(testOptions(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := idx.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	var spec specsv1.Index
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	again, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(raw), string(again)); diff != "" {
		t.Errorf("index encoded again with the image-spec types differs (-built +again):\n%s", diff)
	}
	if bytes.Contains(raw, []byte("artifactType")) {
		t.Errorf("index has an artifactType: %s", raw)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("sha256:%x", sha256.Sum256(raw)); d.String() != want {
		t.Errorf("digest %s, want the manifest's %s", d, want)
	}
	var platforms []string
	for _, m := range spec.Manifests {
		platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
		h, err := v1.NewHash(m.Digest.String())
		if err != nil {
			t.Fatal(err)
		}
		img, err := idx.Image(h)
		if err != nil {
			t.Fatal(err)
		}
		if size, _ := img.Size(); size != m.Size || m.MediaType != specsv1.MediaTypeImageManifest {
			t.Errorf("%s: size %d media type %s, the image's is %d", m.Digest, m.Size, m.MediaType, size)
		}
	}
	if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, platforms); diff != "" {
		t.Errorf("platforms (-want +got):\n%s", diff)
	}
}

// TestLabels: each image carries the OCI labels of version, revision, source
// and creation time, and the creation time (config, history, files) is the
// commit's, given as Created.
func TestLabels(t *testing.T) {
	o := testOptions(t, t.TempDir())
	idx, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"org.opencontainers.image.title":    "p2pcheck",
		"org.opencontainers.image.version":  "v0.3.0",
		"org.opencontainers.image.revision": "0123456789abcdef0123456789abcdef01234567",
		"org.opencontainers.image.source":   "https://github.com/p2pkit/p2pkit",
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.created":  "2026-11-30T11:34:56Z",
	}
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, cf.Config.Labels); diff != "" {
			t.Errorf("%s labels (-want +got):\n%s", d.Platform.Architecture, diff)
		}
		if !cf.Created.Time.Equal(o.Created) || len(cf.History) != 1 || !cf.History[0].Created.Time.Equal(o.Created) {
			t.Errorf("%s created %v, history %v, want %v", d.Platform.Architecture, cf.Created, cf.History, o.Created)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("%s layers %d: %v", d.Platform.Architecture, len(layers), err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			if !h.ModTime.Equal(o.Created) {
				t.Errorf("%s %s modified %v, want %v", d.Platform.Architecture, h.Name, h.ModTime, o.Created)
			}
		}
		rc.Close()
	}
	// Without a revision the label is left out; without a time, the epoch.
	o.Revision, o.Created = "", time.Time{}
	got := labels(o)
	if _, ok := got["org.opencontainers.image.revision"]; ok {
		t.Errorf("revision label without a revision: %v", got)
	}
	idx, err = Build(o)
	if err != nil {
		t.Fatal(err)
	}
	im, _ = idx.IndexManifest()
	img, _ := idx.Image(im.Manifests[0].Digest)
	cf, _ := img.ConfigFile()
	if l := cf.Config.Labels["org.opencontainers.image.created"]; l != "1970-01-01T00:00:00Z" {
		t.Errorf("created without a time %q, want the epoch", l)
	}
}
