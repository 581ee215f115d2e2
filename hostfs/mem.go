package hostfs

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// MemBuilder builds a Root held in memory, one node at a time: package snapshot loads
// an archive with it. Every node made, the parent directories a name implies
// included, counts against Budget.Members.
type MemBuilder struct {
	root   *memNode
	budget Budget
	nodes  int
	ids    uint64 // the last memNode.id given
}

// NewMemBuilder returns a builder of an empty root directory within the limits of b.
func NewMemBuilder(b Budget) *MemBuilder {
	return &MemBuilder{root: &memNode{mode: fs.ModeDir | 0o755, children: map[string]*memNode{}}, budget: b, nodes: 1}
}

// Dir adds the directory name with permission bits perm; an existing directory of
// that name keeps its entries and takes perm.
func (m *MemBuilder) Dir(name string, perm fs.FileMode) error {
	return m.insert(name, &memNode{mode: fs.ModeDir | perm&fs.ModePerm, children: map[string]*memNode{}})
}

// File adds the regular file name holding data, which the Root keeps.
func (m *MemBuilder) File(name string, perm fs.FileMode, data []byte) error {
	return m.insert(name, &memNode{mode: perm & fs.ModePerm, data: data})
}

// Symlink adds the symbolic link name to target, kept as given and checked when it
// is followed.
func (m *MemBuilder) Symlink(name string, perm fs.FileMode, target string) error {
	if target == "" {
		return errors.New("link without a target")
	}
	return m.insert(name, &memNode{mode: fs.ModeSymlink | perm&fs.ModePerm, target: target})
}

// Device adds a device node: a character device when char is set, a block device
// otherwise.
func (m *MemBuilder) Device(name string, perm fs.FileMode, char bool, major, minor uint32) error {
	mode := fs.ModeDevice | perm&fs.ModePerm
	if char {
		mode |= fs.ModeCharDevice
	}
	return m.insert(name, &memNode{mode: mode, major: major, minor: minor})
}

// Root returns the Root built so far, reading within the builder's budget. Link
// resolution in it and in every Root taken from it with Sub shares one
// Budget.WalkElements.
func (m *MemBuilder) Root() Root {
	w := &walkBudget{total: m.budget.WalkElements, perWalk: m.budget.LinkElements}
	return Root{t: memTree{root: m.root, work: w}, budget: m.budget, meter: NewMeter(m.budget.RunBytes)}
}

// insert places n at name, a clean root-relative name, creating missing parent
// directories. A node with the name of an earlier one replaces it, as tar extraction
// does, except that a directory and a non-directory never replace each other.
func (m *MemBuilder) insert(name string, n *memNode) error {
	if name == "." {
		if !n.isDir() {
			return errors.New("the root must be a directory")
		}
		m.root.mode = n.mode
		return nil
	}
	m.ids++
	n.id = m.ids
	grow := func() error {
		m.nodes++
		if m.nodes > m.budget.Members {
			return overBudget("Members", int64(m.budget.Members), "files, links and directories")
		}
		return nil
	}
	dir := m.root
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
			m.ids++
			c = &memNode{mode: fs.ModeDir | 0o755, children: map[string]*memNode{}, id: m.ids}
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
