package snapshot

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/rdmatopo"
)

// Open loads the gzip'd tar file at path, written by [Write] or by hand from a
// root's sys/, proc/ and dev/ trees, into a root held in memory. A file that holds
// rdma-core's "rdma_topo dump" JSON instead is read with package rdmatopo.
//
// path must name a regular file (its links followed, as the user's path is): a
// FIFO, socket, device node or directory is refused without blocking and without
// being read ([hostfs.OpenNamed]), and the file is read at most [FileKind]'s limit
// of bytes.
func Open(path string) (hostfs.Root, error) {
	return OpenBudget(path, hostfs.DefaultBudget)
}

// FileKind is a snapshot file named by a user within the limits of b: at most as
// many bytes as the archive may hold decompressed (b.Bytes). gzip makes a
// snapshot, which is text and config space, several times smaller, so no archive
// within b is refused for its compressed size.
func FileKind(b hostfs.Budget) hostfs.Kind {
	return hostfs.Kind{Name: "snapshot", Limit: b.Bytes}
}

// OpenBudget is [Open] within the limits of b.
func OpenBudget(path string, b hostfs.Budget) (hostfs.Root, error) {
	f, err := hostfs.OpenNamed(nil, path, FileKind(b))
	if err != nil {
		return hostfs.Root{}, fmt.Errorf("snapshot: %w", err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	if head, _ := br.Peek(64); rdmatopo.IsDump(head) {
		root, err := rdmatopo.Read(br)
		if err != nil {
			return hostfs.Root{}, fmt.Errorf("snapshot: %w (in %s)", err, path)
		}
		return root, nil
	}
	root, err := ReadBudget(br, b)
	if err != nil {
		return hostfs.Root{}, fmt.Errorf("%w (in %s)", err, path)
	}
	return root, nil
}

// Read loads a gzip'd tar from r into a root held in memory, within
// [hostfs.DefaultBudget].
//
// Member names are taken relative to "/" with any leading "./" removed. Members may be
// directories, regular files, symbolic links and device nodes; absolute names, names
// with a ".." element, hard links and other special files are rejected. Link
// targets are kept as stored and checked when they are followed: one that leads outside
// the snapshot is an error then. A member with the name of an earlier one replaces it,
// as tar extraction does, except that a directory and a non-directory never replace
// each other. Past a limit of the budget (decompressed bytes, members, sizes, name and
// link lengths, depth) the error wraps [hostfs.ErrBudget].
func Read(r io.Reader) (hostfs.Root, error) {
	return ReadBudget(r, hostfs.DefaultBudget)
}

// ReadBudget is [Read] within the limits of b.
func ReadBudget(r io.Reader, b hostfs.Budget) (hostfs.Root, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return hostfs.Root{}, fmt.Errorf("snapshot: %w", err)
	}
	defer zr.Close()
	// Counting what gzip hands to tar counts every header and extension record:
	// tar reads PAX and GNU long-name records itself, before Next returns.
	cr := &countingReader{r: zr, limit: b.Bytes}
	l := loader{mem: hostfs.NewMemBuilder(b), budget: b}
	tr := newTarReader(cr)
	for {
		hdr, err := tr.Next()
		if cr.err != nil {
			// Whatever tar made of it: even the end of the archive, when the read
			// of its last block went past the limit (io.ReadFull drops the error
			// of a read that filled the block).
			err = cr.err
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return hostfs.Root{}, fmt.Errorf("snapshot: after %d members: %w", l.members, err)
		}
		if err := l.add(hdr, tr); err != nil {
			if cr.err != nil {
				err = cr.err
			}
			return hostfs.Root{}, fmt.Errorf("snapshot: member %q: %w", shorten(hdr.Name), err)
		}
	}
	return l.mem.Root(), nil
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
	mem     *hostfs.MemBuilder
	budget  hostfs.Budget
	members int   // tar members read
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
	perm := fs.FileMode(hdr.Mode) & fs.ModePerm
	switch hdr.Typeflag {
	case tar.TypeDir:
		return l.mem.Dir(name, perm)
	case tar.TypeReg:
		if hdr.Size < 0 || hdr.Size > b.MemberSize {
			return overBudget("MemberSize", b.MemberSize, fmt.Sprintf("bytes in one file (this one has %d)", hdr.Size))
		}
		l.data += hdr.Size
		if l.data > b.Data {
			return overBudget("Data", b.Data, "bytes of file data")
		}
		data := make([]byte, hdr.Size)
		if _, err := io.ReadFull(tr, data); err != nil {
			return err
		}
		return l.mem.File(name, perm, data)
	case tar.TypeSymlink:
		return l.mem.Symlink(name, perm, hdr.Linkname)
	case tar.TypeChar, tar.TypeBlock:
		if hdr.Devmajor < 0 || hdr.Devmajor > 0xfff || hdr.Devminor < 0 || hdr.Devminor > 0xfffff {
			return fmt.Errorf("device number %d:%d out of range", hdr.Devmajor, hdr.Devminor)
		}
		return l.mem.Device(name, perm, hdr.Typeflag == tar.TypeChar, uint32(hdr.Devmajor), uint32(hdr.Devminor))
	}
	return fmt.Errorf("unsupported member type %q", hdr.Typeflag)
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

// overBudget is the error of going past a limit of the Budget.
func overBudget(limit string, value int64, what string) error {
	return &hostfs.BudgetError{Limit: limit, Value: value, What: what}
}

// countingReader fails a read that would take the stream past limit bytes.
type countingReader struct {
	r     io.Reader
	n     int64
	limit int64
	err   error // set once the limit is reached
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if rest := c.limit - c.n; int64(len(p)) > rest+1 {
		p = p[:rest+1] // one byte more than allowed tells a longer stream apart
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.limit {
		c.err = overBudget("Bytes", c.limit, "decompressed bytes, headers included")
		return n, c.err
	}
	return n, err
}
