// Package image builds p2pcheck's container image without a container daemon:
// an OCI image index over linux/amd64 and linux/arm64, each image one layer
// on an empty base (like scratch) holding the static p2pcheck and a pci.ids,
// written as an OCI image layout in a tar archive (what "skopeo copy --all
// oci-archive:FILE:TAG docker://..." and "podman load" read). Unpack reads one
// platform's file system back out, for checking the image by running its
// binary.
//
// The index is serialised with the OCI image-spec's own Go types
// (github.com/opencontainers/image-spec specs-go/v1), which is how
// containers/image (skopeo, podman) writes an index it copies: skopeo 1.9
// decodes the index and encodes it again before pushing it, so an index in
// any other form (go-containerregistry's puts "size" before "digest" and adds
// an "artifactType" to each manifest descriptor) is pushed with another digest
// than the one built. In this form it is pushed byte for byte.
package image

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	specsv1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// Paths of the image's files.
const (
	BinaryPath = "usr/bin/p2pcheck"
	PCIIDsPath = "usr/share/misc/pci.ids"
)

// Options say what goes into the image.
type Options struct {
	// Binaries maps a GOARCH ("amd64", "arm64") to the static p2pcheck built
	// for it.
	Binaries map[string]string
	// PCIIDs is the pci.ids file to ship (Debian's pci.ids package installs
	// /usr/share/misc/pci.ids).
	PCIIDs string
	// Version is the release ("v0.3.0"), the image's tag.
	Version string
	// Repository is where the image is pushed ("ghcr.io/p2pkit/p2pcheck").
	Repository string
	// Revision is the commit the binaries were built from (label
	// org.opencontainers.image.revision); empty leaves the label out.
	Revision string
	// Created is the creation time recorded in the images (their configs, the
	// label org.opencontainers.image.created and the files' modification
	// times): the commit's time (SOURCE_DATE_EPOCH, https://reproducible-builds.org/specs/source-date-epoch/),
	// so that a build is reproducible. The zero time records the Unix epoch.
	Created time.Time
}

// Source is the image's org.opencontainers.image.source label.
const Source = "https://github.com/p2pkit/p2pkit"

// Build returns the image index over one image per binary.
func Build(o Options) (v1.ImageIndex, error) {
	if len(o.Binaries) == 0 || o.PCIIDs == "" || o.Version == "" || o.Repository == "" {
		return nil, errors.New("image: binaries, pci.ids, version and repository are all required")
	}
	if o.Created.IsZero() {
		o.Created = time.Unix(0, 0)
	}
	o.Created = o.Created.UTC()
	ids, err := os.ReadFile(o.PCIIDs)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	archs := make([]string, 0, len(o.Binaries))
	for a := range o.Binaries {
		archs = append(archs, a)
	}
	slices.Sort(archs)
	idx := &index{images: map[v1.Hash]v1.Image{}}
	spec := specsv1.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: specsv1.MediaTypeImageIndex}
	for _, arch := range archs {
		bin, err := os.ReadFile(o.Binaries[arch])
		if err != nil {
			return nil, fmt.Errorf("image: %w", err)
		}
		img, err := platformImage(o, arch, bin, ids)
		if err != nil {
			return nil, fmt.Errorf("image: %s: %w", arch, err)
		}
		d, err := img.Digest()
		if err != nil {
			return nil, fmt.Errorf("image: %s: %w", arch, err)
		}
		size, err := img.Size()
		if err != nil {
			return nil, fmt.Errorf("image: %s: %w", arch, err)
		}
		idx.images[d] = img
		spec.Manifests = append(spec.Manifests, specsv1.Descriptor{
			MediaType: specsv1.MediaTypeImageManifest,
			Digest:    digest.Digest(d.String()),
			Size:      size,
			Platform:  &specsv1.Platform{OS: "linux", Architecture: arch},
		})
	}
	if idx.raw, err = json.Marshal(spec); err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	if idx.manifest, err = v1.ParseIndexManifest(bytes.NewReader(idx.raw)); err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	return idx, nil
}

// index is an image index whose manifest is the bytes raw (see the package
// comment for why they are not go-containerregistry's).
type index struct {
	raw      []byte
	manifest *v1.IndexManifest
	images   map[v1.Hash]v1.Image
}

func (x *index) MediaType() (types.MediaType, error) { return types.OCIImageIndex, nil }
func (x *index) Size() (int64, error)                { return int64(len(x.raw)), nil }
func (x *index) RawManifest() ([]byte, error)        { return x.raw, nil }

func (x *index) Digest() (v1.Hash, error) {
	h, _, err := v1.SHA256(bytes.NewReader(x.raw))
	return h, err
}

func (x *index) IndexManifest() (*v1.IndexManifest, error) { return x.manifest.DeepCopy(), nil }

func (x *index) Image(h v1.Hash) (v1.Image, error) {
	if img, ok := x.images[h]; ok {
		return img, nil
	}
	return nil, fmt.Errorf("image: no image %s in the index", h)
}

func (x *index) ImageIndex(h v1.Hash) (v1.ImageIndex, error) {
	return nil, fmt.Errorf("image: no index %s in the index", h)
}

// platformImage is the image for one architecture.
func platformImage(o Options, arch string, bin, ids []byte) (v1.Image, error) {
	files, err := layerTar(o.Created, []file{
		{BinaryPath, 0o755, bin},
		{PCIIDsPath, 0o644, ids},
	})
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(files)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: o.Created}
	cf.Config.Entrypoint = []string{"/" + BinaryPath}
	cf.History = []v1.History{{Created: cf.Created, CreatedBy: "p2pcheck-image build"}}
	cf.Config.Labels = labels(o)
	return mutate.ConfigFile(img, cf)
}

// labels are the image's OCI annotations as config labels
// (https://github.com/opencontainers/image-spec/blob/main/annotations.md):
// version, revision, source and creation time (RFC 3339) among them.
func labels(o Options) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":    "p2pcheck",
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.source":   Source,
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.created":  o.Created.UTC().Format(time.RFC3339),
	}
	if o.Revision != "" {
		l["org.opencontainers.image.revision"] = o.Revision
	}
	return l
}

type file struct {
	name string
	mode int64
	data []byte
}

// layerTar is a layer's uncompressed tar: the files with their parent
// directories, owned by root, with one modification time.
func layerTar(mtime time.Time, files []file) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		var parents []string
		for d := path.Dir(f.name); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			parents = append(parents, d)
		}
		slices.Reverse(parents)
		for _, d := range parents {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: mtime, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteArchive writes idx as an OCI image layout in a tar archive at name,
// tagged with version (annotation org.opencontainers.image.ref.name) and
// named repository:version for containerd (io.containerd.image.name).
func WriteArchive(name string, idx v1.ImageIndex, repository, version string) error {
	dir, err := os.MkdirTemp("", "p2pcheck-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	err = p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": version,
		"io.containerd.image.name":          repository + ":" + version,
	}))
	if err != nil {
		return err
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Format: tar.FormatPAX}
		if d.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
			return tw.WriteHeader(h)
		}
		h.Typeflag, h.Size = tar.TypeReg, fi.Size()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if cerr := tw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
	}
	return err
}

// Unpack extracts the file system of the image for linux/arch from the
// archive WriteArchive wrote into dest, and returns the tag it carries.
func Unpack(archive, arch, dest string) (tag string, err error) {
	dir, err := os.MkdirTemp("", "p2pcheck-image-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	f, err := os.Open(archive)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := extract(tar.NewReader(f), dir); err != nil {
		return "", fmt.Errorf("image: %s: %w", archive, err)
	}
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return "", err
	}
	tm, err := top.IndexManifest()
	if err != nil {
		return "", err
	}
	if len(tm.Manifests) != 1 {
		return "", fmt.Errorf("image: %s: %d entries in index.json, want 1", archive, len(tm.Manifests))
	}
	tag = tm.Manifests[0].Annotations["org.opencontainers.image.ref.name"]
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		return "", err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return "", err
	}
	for _, d := range im.Manifests {
		if d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Architecture != arch {
			continue
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return "", err
		}
		rc := mutate.Extract(img)
		defer rc.Close()
		return tag, extract(tar.NewReader(rc), dest)
	}
	return "", fmt.Errorf("image: %s: no linux/%s image", archive, arch)
}

// extract writes the directories and regular files of a tar under dest; any
// other member or a name that leaves dest is an error.
func extract(tr *tar.Reader, dest string) error {
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(h.Name)
		if !fs.ValidPath(name) {
			return fmt.Errorf("member %q leaves the archive", h.Name)
		}
		p := filepath.Join(dest, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fs.FileMode(h.Mode)&0o755)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("member %q is not a file or a directory (type %q)", h.Name, h.Typeflag)
		}
	}
}
