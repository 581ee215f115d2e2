package node

import (
	"fmt"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/snapshot"
)

// LoadRoot reads the machine whose filesystem is rooted at dir: "/" for the live
// machine, or a directory holding a copy of its /sys, /proc and /dev (what
// p2pcheck --root takes). The tree is read once; nothing stays open.
func LoadRoot(dir string, opt Options) (*Node, error) {
	root, err := hostfs.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	defer root.Close()
	return Load(root, opt)
}

// LoadSnapshot reads the machine a snapshot file holds (what p2pcheck snapshot
// writes and p2pcheck --snapshot reads), within the default [hostfs.Budget]: a
// hostile archive ends in an error wrapping [hostfs.ErrBudget], never in unbounded
// work.
func LoadSnapshot(file string, opt Options) (*Node, error) {
	root, err := snapshot.Open(file)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	defer root.Close()
	return Load(root, opt)
}
