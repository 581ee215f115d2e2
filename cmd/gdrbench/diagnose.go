package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/p2pkit/p2pkit/sysfs"
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
// (the live / or a test root). openErr is the error opening the device gave, if
// it was tried; uid is the caller's user id, for the permission check.
//
// The order follows how gdrdrv comes up (gdrcopy insmod.sh and its service):
// the module loads and registers a dynamic major (register_chrdev, visible in
// /proc/devices); then a script makes /dev/gdrdrv with that major, minor 0,
// mode 0666. udev makes no node, so each step can be missing on its own.
func diagnose(fsys sysfs.FS, openErr error, uid int) readiness {
	var r readiness
	if openErr != nil {
		r.OpenError = openErr.Error()
	}
	problem := func(what, fix string) {
		r.Problems = append(r.Problems, what)
		if r.Fix == "" {
			r.Fix = fix
		}
	}

	if mods, err := fsys.Modules(); err == nil {
		loaded := false
		for _, m := range mods {
			if m.Name == "gdrdrv" {
				loaded = true
			}
		}
		r.Module = &loaded
		if !loaded {
			problem("the gdrdrv kernel module is not loaded (not in /proc/modules)",
				"load it with the gdrcopy service or its insmod.sh (they also create /dev/gdrdrv); "+
					"plain 'modprobe gdrdrv' does not create the device node. "+
					"With the NVIDIA GPU Operator, enable its GDRCopy driver (GDRCOPY_ENABLED)")
		}
	} else if errors.Is(err, fs.ErrNotExist) {
		problem("/proc/modules does not exist", "run where /proc is mounted")
	} else {
		problem(fmt.Sprintf("cannot read /proc/modules: %v", err), "run where /proc is readable")
	}

	if devs, err := fsys.CharDevices(); err == nil {
		if major, ok := sysfs.LookupMajor(devs, "gdrdrv"); ok {
			r.Major = &major
		} else if r.Module != nil && *r.Module {
			problem("gdrdrv is loaded but registered no character device in /proc/devices",
				"check dmesg for gdrdrv_init errors and reload the module")
		}
	}

	if params, err := fsys.GDRDrvParams(); err == nil {
		r.Version = params["Version"]
	}

	mknod := "sudo mknod -m 666 /dev/gdrdrv c <major from /proc/devices> 0"
	if r.Major != nil {
		mknod = fmt.Sprintf("sudo mknod -m 666 /dev/gdrdrv c %d 0", *r.Major)
	}
	node, err := fsys.DevNode("gdrdrv")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		problem("/dev/gdrdrv does not exist",
			"create it: "+mknod+"; in a container pass the host's node (docker --device=/dev/gdrdrv)")
	case err != nil:
		problem(fmt.Sprintf("cannot inspect /dev/gdrdrv: %v", err), "check /dev permissions")
	default:
		n := &nodeInfo{Path: "/dev/gdrdrv", Mode: node.Mode.String()}
		if node.NumberKnown {
			n.Major, n.Minor = &node.Major, &node.Minor
		}
		r.Node = n
		switch {
		case node.Mode&fs.ModeCharDevice == 0:
			problem(fmt.Sprintf("/dev/gdrdrv is not a character device (mode %s)", node.Mode),
				"remove it and create it again: sudo rm /dev/gdrdrv && "+mknod)
		case node.NumberKnown && r.Major != nil && node.Major != *r.Major:
			// A node left over from an earlier load points at whatever driver
			// owns that major now (gdrcopy issue #115).
			problem(fmt.Sprintf("/dev/gdrdrv has major %d but gdrdrv registered major %d (stale node)", node.Major, *r.Major),
				"remove it and create it again: sudo rm /dev/gdrdrv && "+mknod)
		case node.NumberKnown && node.Minor != 0:
			problem(fmt.Sprintf("/dev/gdrdrv has minor %d; gdrdrv serves minor 0 only", node.Minor),
				"remove it and create it again: sudo rm /dev/gdrdrv && "+mknod)
		case uid != 0 && node.Mode.Perm()&0o006 != 0o006:
			problem(fmt.Sprintf("/dev/gdrdrv is not readable and writable by all users (mode %s)", node.Mode.Perm()),
				"sudo chmod a+rw /dev/gdrdrv (gdrcopy's insmod.sh makes it 0666)")
		}
	}

	if len(r.Problems) == 0 && openErr != nil {
		problem("opening /dev/gdrdrv failed: "+openErr.Error(),
			"check that /dev/gdrdrv belongs to gdrdrv and that the gdrdrv and NVIDIA driver versions match (dmesg)")
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
