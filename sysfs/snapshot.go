package sysfs

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// snapshotLimits bound a snapshot being loaded. A snapshot may come from anywhere (a
// bug report), so it is read as hostile input.
type snapshotLimits struct {
	members    int   // tar members
	memberSize int64 // bytes in one member
	total      int64 // bytes of member data in all
}

var defaultLimits = snapshotLimits{
	members:    100_000,
	memberSize: procLimit, // the largest file a capture stores
	total:      256 << 20,
}

// OpenSnapshot loads the gzip'd tar file at path, written by [WriteSnapshot] or by hand
// from a root's sys/, proc/ and dev/ trees, into an FS held in memory.
func OpenSnapshot(path string) (FS, error) {
	f, err := os.Open(path)
	if err != nil {
		return FS{}, fmt.Errorf("sysfs: snapshot: %w", err)
	}
	defer f.Close()
	fsys, err := ReadSnapshot(bufio.NewReader(f))
	if err != nil {
		return FS{}, fmt.Errorf("%w (in %s)", err, path)
	}
	return fsys, nil
}

// ReadSnapshot loads a gzip'd tar from r into an FS held in memory.
//
// Member names are taken relative to "/" with any leading "./" removed. Members may be
// directories, regular files, symbolic links and device nodes; absolute names, names
// with a ".." element, hard links and other special files are rejected. Link
// targets are kept as stored and checked when they are followed: one that leads outside
// the snapshot is an error then. A member with the name of an earlier one replaces it,
// as tar extraction does, except that a directory and a non-directory never replace
// each other. The snapshot may hold at most 100,000 members, 4 MiB in one member and
// 256 MiB in all.
func ReadSnapshot(r io.Reader) (FS, error) {
	return readSnapshot(r, defaultLimits)
}

func readSnapshot(r io.Reader, lim snapshotLimits) (FS, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return FS{}, fmt.Errorf("sysfs: snapshot: %w", err)
	}
	defer zr.Close()
	root := &memNode{mode: fs.ModeDir | 0o755, children: map[string]*memNode{}}
	tr := tar.NewReader(zr)
	var members int
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return FS{}, fmt.Errorf("sysfs: snapshot: after %d members: %w", members, err)
		}
		members++
		if members > lim.members {
			return FS{}, fmt.Errorf("sysfs: snapshot: more than %d members", lim.members)
		}
		bad := func(err error) error {
			return fmt.Errorf("sysfs: snapshot: member %q: %w", hdr.Name, err)
		}
		name, err := memberName(hdr.Name)
		if err != nil {
			return FS{}, bad(err)
		}
		n := &memNode{mode: fs.FileMode(hdr.Mode) & fs.ModePerm}
		switch hdr.Typeflag {
		case tar.TypeDir:
			n.mode |= fs.ModeDir
			n.children = map[string]*memNode{}
		case tar.TypeReg:
			if hdr.Size < 0 || hdr.Size > lim.memberSize {
				return FS{}, bad(fmt.Errorf("size %d is over the limit of %d bytes", hdr.Size, lim.memberSize))
			}
			total += hdr.Size
			if total > lim.total {
				return FS{}, bad(fmt.Errorf("snapshot holds more than %d bytes", lim.total))
			}
			n.data = make([]byte, hdr.Size)
			if _, err := io.ReadFull(tr, n.data); err != nil {
				return FS{}, bad(err)
			}
		case tar.TypeSymlink:
			if hdr.Linkname == "" {
				return FS{}, bad(errors.New("link without a target"))
			}
			n.mode |= fs.ModeSymlink
			n.target = hdr.Linkname
		case tar.TypeChar, tar.TypeBlock:
			n.mode |= fs.ModeDevice
			if hdr.Typeflag == tar.TypeChar {
				n.mode |= fs.ModeCharDevice
			}
			if hdr.Devmajor < 0 || hdr.Devmajor > 0xfff || hdr.Devminor < 0 || hdr.Devminor > 0xfffff {
				return FS{}, bad(fmt.Errorf("device number %d:%d out of range", hdr.Devmajor, hdr.Devminor))
			}
			n.major, n.minor = uint32(hdr.Devmajor), uint32(hdr.Devminor)
		default:
			return FS{}, bad(fmt.Errorf("unsupported member type %q", hdr.Typeflag))
		}
		if err := insert(root, name, n); err != nil {
			return FS{}, bad(err)
		}
	}
	return FS{t: memTree{root: root}}, nil
}

// memberName checks a tar member name and returns it as a clean root-relative name,
// "." for the root.
func memberName(raw string) (string, error) {
	name := raw
	for strings.HasPrefix(name, "./") {
		name = name[2:]
	}
	name = strings.TrimRight(name, "/")
	switch {
	case strings.HasPrefix(raw, "/"):
		return "", errors.New("absolute name")
	case name == "" || name == ".":
		return ".", nil
	case strings.ContainsRune(name, 0):
		return "", errors.New("name holds a NUL byte")
	}
	for _, el := range strings.Split(name, "/") {
		switch el {
		case "..":
			return "", errors.New("name leads outside the snapshot")
		case "", ".":
			return "", errors.New("name is not clean")
		}
	}
	return name, nil
}

// insert places n at name below root, creating missing parent directories.
func insert(root *memNode, name string, n *memNode) error {
	if name == "." {
		if !n.isDir() {
			return errors.New("the root must be a directory")
		}
		root.mode = n.mode
		return nil
	}
	dir := root
	els := strings.Split(name, "/")
	for _, el := range els[:len(els)-1] {
		c, ok := dir.children[el]
		if !ok {
			c = &memNode{mode: fs.ModeDir | 0o755, children: map[string]*memNode{}}
			dir.children[el] = c
		}
		if !c.isDir() {
			return fmt.Errorf("parent %q is not a directory", el)
		}
		dir = c
	}
	base := els[len(els)-1]
	old, ok := dir.children[base]
	switch {
	case !ok:
		dir.children[base] = n
	case old.isDir() && n.isDir():
		old.mode = n.mode // keep the children already loaded
	case old.isDir() != n.isDir():
		return errors.New("a directory and a non-directory share the name")
	default:
		dir.children[base] = n
	}
	return nil
}
