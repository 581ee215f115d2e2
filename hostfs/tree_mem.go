package hostfs

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// memNode is one file, directory, link or device node of a snapshot.
type memNode struct {
	mode         fs.FileMode // type and permission bits
	data         []byte      // regular file contents
	target       string      // link target, as stored
	children     map[string]*memNode
	major, minor uint32 // device nodes
	id           uint64 // unique in its snapshot; see FileID
}

func (n *memNode) isDir() bool { return n.mode.IsDir() }

// memTree is a snapshot loaded into memory. It resolves links itself, with the same
// rules os.Root applies to a directory: links are followed inside the tree only, at
// most maxLinkHops of them per resolution. Every element a resolution visits, those a
// link target splices in included, is counted against Budget.LinkElements and
// Budget.WalkElements.
type memTree struct {
	root *memNode
	work *walkBudget // shared by every tree of one snapshot; nil: unbounded
}

// walk returns the node name leads to, following a final link when follow is set.
func (t memTree) walk(name string, follow bool) (*memNode, error) {
	if name == "" {
		return nil, errEmptyName
	}
	parts, done := splitName(name) // done: the elements counted so far
	if err := t.work.spend(0, done); err != nil {
		return nil, err
	}
	stack := []*memNode{t.root} // the directories from the root to the current one
	hops := 0
	for i := 0; i < len(parts); i++ {
		p := parts[i]
		switch p {
		case ".":
			continue
		case "..":
			if len(stack) == 1 {
				return nil, errEscapes
			}
			stack = stack[:len(stack)-1]
			continue
		}
		dir := stack[len(stack)-1]
		if !dir.isDir() {
			return nil, errNotDir
		}
		n, ok := dir.children[p]
		if !ok {
			return nil, fs.ErrNotExist
		}
		last := i == len(parts)-1
		if n.mode&fs.ModeSymlink != 0 && (!last || follow) {
			hops++
			if hops > maxLinkHops {
				return nil, errLoop
			}
			if n.target == "" {
				return nil, errEmptyName
			}
			if path.IsAbs(n.target) {
				return nil, fmt.Errorf("%w: %q", errEscapes, n.target)
			}
			// Splice the target in place of this element; the directory stack
			// stays at the link's directory. The elements spliced in and those
			// moved behind them are counted as visited again.
			target, cost := splitName(n.target)
			rest := parts[i+1:]
			if err := t.work.spend(done, cost+len(rest)); err != nil {
				return nil, err
			}
			done += cost + len(rest)
			parts = append(target, rest...)
			i = -1
			continue
		}
		if last {
			return n, nil
		}
		stack = append(stack, n)
	}
	return stack[len(stack)-1], nil
}

// splitName splits a slash-separated name into its elements, dropping empty ones and
// every "." but a final one (which makes a final link be followed). It also returns
// the number of elements the name has, those dropped included: the work it stands for.
func splitName(name string) (els []string, count int) {
	for el := range strings.SplitSeq(name, "/") {
		count++
		if el != "" && el != "." {
			els = append(els, el)
		}
	}
	if path.Base(name) == "." && len(els) > 0 {
		els = append(els, ".")
	}
	return els, count
}

// regular returns the regular file name leads to.
func (t memTree) regular(name string) (*memNode, error) {
	n, err := t.walk(name, true)
	if err != nil {
		return nil, err
	}
	switch {
	case n.isDir():
		return nil, errIsDir
	case !n.mode.IsRegular():
		return nil, ErrNotFile
	}
	return n, nil
}

func (t memTree) readFile(name string, buf []byte, _, _ bool) (int, fs.FileMode, error) {
	n, err := t.regular(name)
	if err != nil {
		return 0, 0, err
	}
	return copy(buf, n.data), n.mode.Perm(), nil
}

func (t memTree) openReaderAt(name string) (ReaderAtCloser, int64, error) {
	n, err := t.regular(name)
	if err != nil {
		return nil, 0, err
	}
	return nopCloser{bytes.NewReader(n.data)}, int64(len(n.data)), nil
}

// nopCloser adds a Close that does nothing.
type nopCloser struct{ io.ReaderAt }

func (nopCloser) Close() error { return nil }

func (t memTree) readAll(name string, limit int) ([]byte, error) {
	n, err := t.regular(name)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(n.data[:min(len(n.data), limit+1)]), nil
}

func (t memTree) readDir(name string) ([]DirEntry, error) {
	n, err := t.walk(name, true)
	if err != nil {
		return nil, err
	}
	if !n.isDir() {
		return nil, errNotDir
	}
	out := make([]DirEntry, 0, len(n.children))
	for name, c := range n.children {
		out = append(out, DirEntry{Name: name, Type: c.mode.Type()})
	}
	slices.SortFunc(out, func(a, b DirEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (t memTree) names(name string) ([]string, error) {
	n, err := t.walk(name, true)
	if err != nil {
		return nil, err
	}
	if !n.isDir() {
		return nil, errNotDir
	}
	out := make([]string, 0, len(n.children))
	for name := range n.children {
		out = append(out, name)
	}
	slices.Sort(out)
	return out, nil
}

func (t memTree) lstat(name string) (FileInfo, error) {
	n, err := t.walk(name, false)
	if err != nil {
		return FileInfo{}, err
	}
	fi := FileInfo{Mode: n.mode}
	if n.mode&fs.ModeDevice != 0 {
		fi.Major, fi.Minor, fi.HasDev = n.major, n.minor, true
	}
	return fi, nil
}

func (t memTree) readLink(name string) (string, error) {
	n, err := t.walk(name, false)
	if err != nil {
		return "", err
	}
	if n.mode&fs.ModeSymlink == 0 {
		return "", ErrNotLink
	}
	return n.target, nil
}

func (t memTree) sub(name string) (tree, error) {
	n, err := t.walk(name, true)
	if err != nil {
		return nil, err
	}
	if !n.isDir() {
		return nil, errNotDir
	}
	return memTree{root: n, work: t.work}, nil
}

func (t memTree) fileID(name string) (FileID, error) {
	n, err := t.walk(name, true)
	if err != nil {
		return FileID{}, err
	}
	return FileID{ino: n.id}, nil
}

func (memTree) close() error { return nil }
