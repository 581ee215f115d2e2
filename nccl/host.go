package nccl

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Host is what NCCL reads of a machine beyond the PCIe tree, the CPU and NVML, as
// p2pcheck found it where it ran: the NCCL_* variables of the environment, the
// home directory (for ~/.nccl.conf), the interfaces NCCL's Socket transport would
// see, and the libnccl.so found. A snapshot records it (p2pkit/nccl.json) so that
// 'p2pcheck nccl' on the snapshot answers as it did live. The interfaces'
// devices and speeds, the RDMA devices and the configuration files are read from
// the machine's files, live or captured, not from here.
type Host struct {
	// Env holds the NCCL_* variables of the environment.
	Env map[string]string `json:"env"`
	// Home is the home directory ~/.nccl.conf is read from; empty when unknown.
	Home string `json:"home,omitempty"`
	// Interfaces names the interfaces that are up with an address, in the
	// kernel's order (getifaddrs); nil when unknown.
	Interfaces []string `json:"interfaces"`
	// Lib is the libnccl.so found, nil when none was.
	Lib *Lib `json:"lib,omitempty"`
}

// Lib is a libnccl.so and the version its banner gives.
type Lib struct {
	Version string `json:"version"`
	Path    string `json:"path"`
	// Others says which other versions are installed, which a job may load.
	Others []string `json:"others,omitempty"`
}

// Bounds of a recorded Host: more than NCCL or Linux ever has (IFNAMSIZ is 16,
// NCCL's Socket transport uses at most 16 interfaces).
const (
	maxHostVars   = 1024
	maxHostIfaces = 1024
	maxIfaceName  = 15
	maxHostBytes  = 1 << 20
)

// ParseHost reads a recorded Host, refusing one beyond its bounds: a variable
// whose name is not NCCL_*, an interface name that is not one, a version that
// does not parse.
func ParseHost(b []byte) (*Host, error) {
	if len(b) > maxHostBytes {
		return nil, fmt.Errorf("nccl: host facts of %d bytes, more than %d", len(b), maxHostBytes)
	}
	var h Host
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("nccl: host facts: %w", err)
	}
	if len(h.Env) > maxHostVars || len(h.Interfaces) > maxHostIfaces {
		return nil, fmt.Errorf("nccl: host facts: more than %d variables or %d interfaces", maxHostVars, maxHostIfaces)
	}
	for k := range h.Env {
		if !strings.HasPrefix(k, "NCCL_") {
			return nil, fmt.Errorf("nccl: host facts: variable %q is not NCCL's", k)
		}
	}
	for _, i := range h.Interfaces {
		if i == "" || len(i) > maxIfaceName || strings.ContainsAny(i, "/\x00") || i == "." || i == ".." {
			return nil, fmt.Errorf("nccl: host facts: %q is not an interface name", i)
		}
	}
	if h.Lib != nil {
		if _, err := ParseVersion(h.Lib.Version); err != nil {
			return nil, fmt.Errorf("nccl: host facts: %w", err)
		}
	}
	if h.Env == nil {
		h.Env = map[string]string{}
	}
	return &h, nil
}
