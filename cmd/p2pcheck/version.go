package main

import (
	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/internal/buildinfo"
	"github.com/p2pkit/p2pkit/internal/cuda"
)

// version is the release version the report, the textfile and the NFD file
// carry ("v0.3.0"; "(devel)" for a build from a work tree).
func version() string { return buildinfo.Version() }

// versionLine is what --version prints: version, commit, and whether NVML (GPU
// facts) and CUDA (--probe) support is built in.
func versionLine() string {
	return buildinfo.Line("p2pcheck", buildinfo.Feature{Name: "NVML", Built: gpu.BuiltIn}, buildinfo.Feature{Name: "CUDA", Built: cuda.BuiltIn})
}
