package main

import (
	"errors"
	"fmt"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/render"
	"github.com/p2pkit/p2pkit/snapshot"
)

// openRoot opens the machine the flags name: a snapshot, or a root directory
// (the live machine by default), with the heap made ready for a large one
// (hugePagesForArchive, hugePagesForTree). Failing to open it means p2pcheck cannot
// evaluate anything (exit 3).
func (o *globalOptions) openRoot() (hostfs.Root, error) {
	var root hostfs.Root
	var err error
	if o.snapshot != "" {
		hugePagesForArchive(o.snapshot)
		root, err = snapshot.Open(o.snapshot)
	} else if root, err = hostfs.Open(o.root); err == nil {
		hugePagesForTree(root)
	}
	if err != nil {
		return hostfs.Root{}, noEvalError(err)
	}
	return root.WithMeter(o.reads), nil
}

// load reads the machine into a node.Node. Warnings (unreadable files, a missing
// pci.ids) go to stderr in text mode; JSON output carries them itself.
func (o *globalOptions) load() (*node.Node, error) {
	return o.loadWith(node.Options{})
}

// loadTree is load for commands that show the tree alone (topo): the platform
// facts are not read.
func (o *globalOptions) loadTree() (*node.Node, error) {
	return o.loadWith(node.Options{NoPlatform: true})
}

func (o *globalOptions) loadWith(opt node.Options) (*node.Node, error) {
	fsys, err := o.openRoot()
	if err != nil {
		return nil, err
	}
	defer fsys.Close()
	opt.Kernel, opt.PCIIDs = o.kernel, o.pciIDs
	opt.NoGPU = opt.NoGPU || o.noNVML
	n, err := node.Load(fsys, opt)
	switch {
	case errors.Is(err, node.ErrBadKernelVersion):
		return nil, usageError("--kernel-version: %v", err)
	case err != nil:
		return nil, noEvalError(fmt.Errorf("reading %s: %w", o.source(), err))
	}
	return n, nil
}

// source names what is being analysed, for messages.
func (o *globalOptions) source() string {
	if o.snapshot != "" {
		return "snapshot " + o.snapshot
	}
	if o.root == "/" {
		return "this machine"
	}
	return "root " + o.root
}

// printWarnings reports what degraded the picture, on stderr so that stdout stays
// parseable.
func (o *globalOptions) printWarnings(n *node.Node) {
	for _, w := range n.Warnings {
		fmt.Fprintln(o.stderr, "p2pcheck: warning:", render.Escape(w.Error()))
	}
}
