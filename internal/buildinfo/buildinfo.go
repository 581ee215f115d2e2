// Package buildinfo says which build a p2pkit binary is: the release version and
// commit that "make release" stamps in with the linker, and whether NVML and
// CUDA support is built in (both need cgo on Linux).
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
)

// Set by the linker: go build -ldflags "-X
// github.com/p2pkit/p2pkit/internal/buildinfo.version=v0.3.0 -X
// github.com/p2pkit/p2pkit/internal/buildinfo.commit=<git rev-parse HEAD>".
var (
	version string
	commit  string
)

// Version is the release version stamped in by the linker, else the module
// version the go command recorded ("v0.3.0" for go install ...@v0.3.0,
// "(devel)" for a build from a work tree), else "unknown".
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "unknown"
}

// Commit is the VCS revision stamped in by the linker, else the one the go
// command recorded, else "unknown".
func Commit() string {
	if commit != "" {
		return commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				return s.Value
			}
		}
	}
	return "unknown"
}

// Feature is an optional capability a build has or lacks.
type Feature struct {
	Name  string
	Built bool
}

// Line is the one line a tool's --version prints: its name, the version and
// space-separated key=value facts, for people and for scripts:
//
//	p2pcheck v0.3.0 commit=0123456789ab nvml=true cuda=true go=go1.26.8 platform=linux/amd64
func Line(tool string, features ...Feature) string {
	c := Commit()
	if len(c) > 12 {
		c = c[:12]
	}
	var b strings.Builder
	b.WriteString(tool + " " + Version() + " commit=" + c)
	for _, f := range features {
		b.WriteString(" " + strings.ToLower(f.Name) + "=" + strconv.FormatBool(f.Built))
	}
	b.WriteString(" go=" + runtime.Version() + " platform=" + runtime.GOOS + "/" + runtime.GOARCH)
	return b.String()
}
