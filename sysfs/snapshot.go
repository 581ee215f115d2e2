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

// OpenSnapshot loads the gzip'd tar file at path, written by [WriteSnapshot] or by hand
// from a root's sys/, proc/ and dev/ trees, into an FS held in memory.
func OpenSnapshot(path string) (FS, error) {
	return OpenSnapshotBudget(path, DefaultBudget)
}

// OpenSnapshotBudget is [OpenSnapshot] within the limits of b.
func OpenSnapshotBudget(path string, b Budget) (FS, error) {
	f, err := os.Open(path)
	if err != nil {
		return FS{}, fmt.Errorf("sysfs: snapshot: %w", err)
	}
	defer f.Close()
	fsys, err := ReadSnapshotBudget(bufio.NewReader(f), b)
	if err != nil {
		return FS{}, fmt.Errorf("%w (in %s)", err, path)
	}
	return fsys, nil
}

// ReadSnapshot loads a gzip'd tar from r into an FS held in memory, within
// [DefaultBudget].
//
// Member names are taken relative to "/" with any leading "./" removed. Members may be
// directories, regular files, symbolic links and device nodes; absolute names, names
// with a ".." element, hard links and other special files are rejected. Link
// targets are kept as stored and checked when they are followed: one that leads outside
// the snapshot is an error then. A member with the name of an earlier one replaces it,
// as tar extraction does, except that a directory and a non-directory never replace
// each other. Past a limit of the budget (decompressed bytes, members, sizes, name and
// link lengths, depth) the error wraps [ErrBudget].
func ReadSnapshot(r io.Reader) (FS, error) {
	return ReadSnapshotBudget(r, DefaultBudget)
}

// ReadSnapshotBudget is [ReadSnapshot] within the limits of b.
func ReadSnapshotBudget(r io.Reader, b Budget) (FS, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return FS{}, fmt.Errorf("sysfs: snapshot: %w", err)
	}
	defer zr.Close()
	// Counting what gzip hands to tar counts every header and extension record:
	// tar reads PAX and GNU long-name records itself, before Next returns.
	cr := &countingReader{r: zr, limit: b.Bytes}
	root := &memNode{mode: fs.ModeDir | 0o755, children: map[string]*memNode{}}
	l := loader{root: root, budget: b, nodes: 1}
	tr := tar.NewReader(cr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if cr.err != nil {
			err = cr.err // whatever tar made of it
		}
		if err != nil {
			return FS{}, fmt.Errorf("sysfs: snapshot: after %d members: %w", l.members, err)
		}
		if err := l.add(hdr, tr); err != nil {
			if cr.err != nil {
				err = cr.err
			}
			return FS{}, fmt.Errorf("sysfs: snapshot: member %q: %w", shorten(hdr.Name), err)
		}
	}
	w := &walkBudget{total: b.WalkElements, perWalk: b.LinkElements}
	return FS{t: memTree{root: root, work: w}, budget: b}, nil
}

// shorten cuts a hostile member name for an error message.
func shorten(name string) string {
	const max = 200
	if len(name) <= max {
		return name
	}
	return name[:max] + fmt.Sprintf("... (%d bytes)", len(name))
}

// loader builds the tree of a snapshot member by member.
type loader struct {
	root    *memNode
	budget  Budget
	members int   // tar members read
	nodes   int   // tree nodes made, implied parents included
	data    int64 // bytes of regular files kept
}

// add checks one member and places it in the tree.
func (l *loader) add(hdr *tar.Header, tr io.Reader) error {
	b := l.budget
	l.members++
	switch {
	case len(hdr.Name) > b.NameLen:
		return overBudget("NameLen", int64(b.NameLen), "bytes in a member name")
	case len(hdr.Linkname) > b.LinkTargetLen:
		return overBudget("LinkTargetLen", int64(b.LinkTargetLen), "bytes in a link target")
	}
	name, err := memberName(hdr.Name)
	if err != nil {
		return err
	}
	if d := strings.Count(name, "/") + 1; d > b.PathDepth {
		return overBudget("PathDepth", int64(b.PathDepth), "elements in a member name")
	}
	n := &memNode{mode: fs.FileMode(hdr.Mode) & fs.ModePerm}
	switch hdr.Typeflag {
	case tar.TypeDir:
		n.mode |= fs.ModeDir
		n.children = map[string]*memNode{}
	case tar.TypeReg:
		if hdr.Size < 0 || hdr.Size > b.MemberSize {
			return overBudget("MemberSize", b.MemberSize, fmt.Sprintf("bytes in one file (this one has %d)", hdr.Size))
		}
		l.data += hdr.Size
		if l.data > b.Data {
			return overBudget("Data", b.Data, "bytes of file data")
		}
		n.data = make([]byte, hdr.Size)
		if _, err := io.ReadFull(tr, n.data); err != nil {
			return err
		}
	case tar.TypeSymlink:
		if hdr.Linkname == "" {
			return errors.New("link without a target")
		}
		n.mode |= fs.ModeSymlink
		n.target = hdr.Linkname
	case tar.TypeChar, tar.TypeBlock:
		n.mode |= fs.ModeDevice
		if hdr.Typeflag == tar.TypeChar {
			n.mode |= fs.ModeCharDevice
		}
		if hdr.Devmajor < 0 || hdr.Devmajor > 0xfff || hdr.Devminor < 0 || hdr.Devminor > 0xfffff {
			return fmt.Errorf("device number %d:%d out of range", hdr.Devmajor, hdr.Devminor)
		}
		n.major, n.minor = uint32(hdr.Devmajor), uint32(hdr.Devminor)
	default:
		return fmt.Errorf("unsupported member type %q", hdr.Typeflag)
	}
	return l.insert(name, n)
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
	for el := range strings.SplitSeq(name, "/") {
		switch el {
		case "..":
			return "", errors.New("name leads outside the snapshot")
		case "", ".":
			return "", errors.New("name is not clean")
		}
	}
	return name, nil
}

// insert places n at name below the root, creating missing parent directories;
// every node made counts against Budget.Members.
func (l *loader) insert(name string, n *memNode) error {
	if name == "." {
		if !n.isDir() {
			return errors.New("the root must be a directory")
		}
		l.root.mode = n.mode
		return nil
	}
	grow := func() error {
		l.nodes++
		if l.nodes > l.budget.Members {
			return overBudget("Members", int64(l.budget.Members), "files, links and directories")
		}
		return nil
	}
	dir := l.root
	rest := name
	for {
		el, after, more := strings.Cut(rest, "/")
		if !more {
			break
		}
		rest = after
		c, ok := dir.children[el]
		if !ok {
			if err := grow(); err != nil {
				return err
			}
			c = &memNode{mode: fs.ModeDir | 0o755, children: map[string]*memNode{}}
			dir.children[el] = c
		}
		if !c.isDir() {
			return fmt.Errorf("parent %q is not a directory", el)
		}
		dir = c
	}
	old, ok := dir.children[rest]
	switch {
	case !ok:
		if err := grow(); err != nil {
			return err
		}
		dir.children[rest] = n
	case old.isDir() && n.isDir():
		old.mode = n.mode // keep the children already loaded
	case old.isDir() != n.isDir():
		return errors.New("a directory and a non-directory share the name")
	default:
		dir.children[rest] = n
	}
	return nil
}
