package procfs

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/hostfs"
)

// This file reads /proc/modules, which kernel/module/procfs.c m_show prints.

// Module is one line of /proc/modules.
type Module struct {
	Name     string
	Size     uint64
	RefCount int      // -1 when the kernel cannot unload modules and prints "-"
	UsedBy   []string // modules that depend on this one
	State    string   // "Live", "Loading" or "Unloading"
	Taints   string   // e.g. "OE", empty when untainted
}

// Modules are the lines of /proc/modules.
type Modules []Module

// Loaded reports whether the module name is loaded: it has a line of its own.
// /proc/modules prints the name the module was built with, in which kbuild
// turned every '-' into '_' (scripts/Makefile.lib, KBUILD_MODNAME), so name is
// matched that way too: nvidia-peermem finds nvidia_peermem.
func (m Modules) Loaded(name string) bool {
	name = strings.ReplaceAll(name, "-", "_")
	for _, mod := range m {
		if mod.Name == name {
			return true
		}
	}
	return false
}

// Modules reads /proc/modules.
func (fsys FS) Modules() ([]Module, error) {
	b, err := fsys.r.ReadFile("proc/modules", procLimit)
	if err != nil {
		return nil, err
	}
	m, err := parseModules(b)
	if err != nil {
		return nil, hostfs.PathError("parse", "proc/modules", err)
	}
	return m, nil
}

// parseModules parses /proc/modules (kernel/module/procfs.c m_show): "name size
// refcount deps state address [(taints)]" per line, deps being "-" or "a,b,".
func parseModules(b []byte) ([]Module, error) {
	mods := []Module{}
	for i, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 5 {
			return nil, fmt.Errorf("line %d: want name, size, refcount, deps and state, got %q", i+1, line)
		}
		m := Module{Name: f[0], State: f[4], RefCount: -1}
		var err error
		if m.Size, err = strconv.ParseUint(f[1], 10, 64); err != nil {
			return nil, fmt.Errorf("line %d: bad size %q", i+1, f[1])
		}
		if f[2] != "-" {
			if m.RefCount, err = strconv.Atoi(f[2]); err != nil || m.RefCount < 0 {
				return nil, fmt.Errorf("line %d: bad refcount %q", i+1, f[2])
			}
		}
		if f[3] != "-" {
			for _, d := range strings.Split(f[3], ",") {
				if d != "" {
					m.UsedBy = append(m.UsedBy, d)
				}
			}
		}
		if len(f) > 6 {
			m.Taints = strings.Trim(f[6], "()")
		}
		mods = append(mods, m)
	}
	return mods, nil
}
