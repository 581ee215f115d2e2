package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/p2pkit/p2pkit/internal/gdrready"
	"github.com/p2pkit/p2pkit/procfs"
)

// readiness is what gdrbench found out about gdrdrv when it could not use it,
// the prerequisites in the order a fix has to follow.
type readiness struct {
	Ready bool `json:"ready"`
	// Module reports gdrdrv in /proc/modules; nil when /proc/modules is unreadable.
	Module *bool `json:"module_loaded,omitempty"`
	// Major is the character major gdrdrv registered in /proc/devices.
	Major *uint32 `json:"major,omitempty"`
	// Node describes /dev/gdrdrv; nil when it does not exist.
	Node *nodeInfo `json:"node,omitempty"`
	// Version is the module's own version line from /proc/driver/gdrdrv/params.
	Version string `json:"version,omitempty"`
	// OpenError is why opening /dev/gdrdrv failed, when it was tried.
	OpenError string `json:"open_error,omitempty"`
	// Problems lists what is wrong, most fundamental first.
	Problems []string `json:"problems,omitempty"`
	// Fix is the one thing to do first.
	Fix string `json:"fix,omitempty"`
}

type nodeInfo struct {
	Path  string  `json:"path"`
	Mode  string  `json:"mode"`
	Major *uint32 `json:"major,omitempty"`
	Minor *uint32 `json:"minor,omitempty"`
}

// diagnose explains why gdrdrv cannot be used, from the tree rooted at fsys
// (the live / or a test root), with the rules of package gdrready that p2pcheck's
// gdrdrv check uses too. openErr is the error opening the device gave, if it was
// tried; uid is the caller's user id: root may open any node, so its mode only
// matters to others.
func diagnose(fsys procfs.FS, openErr error, uid int) readiness {
	var r readiness
	var g gdrready.Facts
	if openErr != nil {
		r.OpenError = openErr.Error()
		g.OpenErr = r.OpenError
	}
	problem := func(what, fix string) {
		r.Problems = append(r.Problems, what)
		if r.Fix == "" {
			r.Fix = fix
		}
	}

	if mods, err := fsys.Modules(); err == nil {
		loaded := procfs.Modules(mods).Loaded("gdrdrv")
		r.Module, g.Module = &loaded, &loaded
	} else if errors.Is(err, fs.ErrNotExist) {
		problem("/proc/modules does not exist", "run where /proc is mounted")
	} else {
		problem(fmt.Sprintf("cannot read /proc/modules: %v", err), "run where /proc is readable")
	}
	if devs, err := fsys.CharDevices(); err == nil {
		g.DevicesRead = true
		if major, ok := procfs.LookupMajor(devs, "gdrdrv"); ok {
			r.Major, g.Major = &major, &major
		}
	}
	if params, err := fsys.GDRDrvParams(); err == nil {
		r.Version, g.Params = params[gdrready.ParamVersion], params
	}
	if drv, err := fsys.NVIDIADriver(); err == nil {
		g.Driver = &gdrready.Driver{Version: drv.Version, Major: drv.Major, Open: drv.Open}
	}
	if c, err := fsys.CPUInfo(); err == nil {
		g.Arm64 = c.Arm64()
		g.IntelTDXGuest = c.HasFlag("tdx_guest")
	}
	if uid == 0 {
		g.Access = &gdrready.Access{UID: 0, ReadWrite: true}
	}
	switch node, err := fsys.DevNode("gdrdrv"); {
	case err == nil:
		n := &nodeInfo{Path: "/dev/gdrdrv", Mode: node.Mode.String()}
		if node.NumberKnown {
			n.Major, n.Minor = &node.Major, &node.Minor
		}
		r.Node = n
		g.Node = &gdrready.Node{Mode: node.Mode, Major: node.Major, Minor: node.Minor, NumberKnown: node.NumberKnown}
	case !errors.Is(err, fs.ErrNotExist):
		g.NodeErr = err.Error()
	}
	v := gdrready.Judge(g)
	for _, p := range v.Problems {
		if p.Severity == gdrready.Info {
			continue
		}
		fix := ""
		if len(p.Fix) > 0 {
			fix = p.Fix[0]
		}
		problem(p.What, fix)
	}
	if !v.Known && g.NodeErr == "" {
		problem("/dev/gdrdrv does not exist", gdrready.FixLoad)
	}
	r.Ready = len(r.Problems) == 0
	return r
}

// writeText prints the diagnosis for people.
func (r readiness) writeText(w io.Writer) {
	if r.Ready {
		fmt.Fprintln(w, "gdrdrv: ready")
		return
	}
	fmt.Fprintln(w, "gdrdrv is not usable:")
	for _, p := range r.Problems {
		fmt.Fprintf(w, "  - %s\n", p)
	}
	var seen []string
	if r.Module != nil {
		seen = append(seen, fmt.Sprintf("module loaded: %v", *r.Module))
	}
	if r.Major != nil {
		seen = append(seen, fmt.Sprintf("major: %d", *r.Major))
	}
	if r.Node != nil {
		seen = append(seen, "node: "+r.Node.Mode)
	}
	if r.Version != "" {
		seen = append(seen, "version: "+r.Version)
	}
	if len(seen) > 0 {
		fmt.Fprintf(w, "  (%s)\n", strings.Join(seen, ", "))
	}
	fmt.Fprintf(w, "fix first: %s\n", r.Fix)
}
