package main

import "runtime/debug"

// version returns the module version p2pcheck was built from ("(devel)" for a
// source build), with the VCS revision when the build recorded one.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return v
}
