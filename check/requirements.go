package check

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// DefaultRequirements are what a node is judged against when nothing is required
// explicitly: GPUs reach each other peer-to-peer and reach the RDMA NICs with
// GPUDirect RDMA. Nothing more is inferred: GDRCopy and NVMe P2PDMA must be asked
// for (--require gdrcopy, nvme-p2p).
var DefaultRequirements = []Capability{CapP2P, CapGDR}

// capabilities lists every capability in the order reports print them.
var capabilities = []Capability{CapP2P, CapGDR, CapGDRCopy, CapNVMeP2P}

// Capabilities returns every capability a node can be required to have.
func Capabilities() []Capability { return slices.Clone(capabilities) }

// ErrUnknownCapability is returned for a requirement that names no capability.
var ErrUnknownCapability = errors.New("check: unknown capability")

// ParseRequirements parses a comma-separated list of capabilities ("p2p,gdr"),
// as --require and the configuration file's "require" key take it. Blanks around
// names are ignored and repeated names count once; the result is in
// [Capabilities] order. An empty list is an error: a node required to do
// nothing cannot fail.
func ParseRequirements(s string) ([]Capability, error) {
	seen := map[Capability]bool{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		c := Capability(name)
		if !slices.Contains(capabilities, c) {
			return nil, fmt.Errorf("%w %q (valid: %s)", ErrUnknownCapability, name, capabilityList(capabilities))
		}
		seen[c] = true
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("%w: empty list (valid: %s)", ErrUnknownCapability, capabilityList(capabilities))
	}
	var out []Capability
	for _, c := range capabilities {
		if seen[c] {
			out = append(out, c)
		}
	}
	return out, nil
}

// requirements returns req, or [DefaultRequirements] when req is empty.
func requirements(req []Capability) []Capability {
	if len(req) == 0 {
		return DefaultRequirements
	}
	return req
}

// blocksAny reports whether r concerns one of the capabilities in req: it blocks
// one of them, or its Blocks is empty (it concerns every capability). A
// PerformanceOnly result concerns none.
func (r *Result) blocksAny(req []Capability) bool {
	if r.PerformanceOnly {
		return false
	}
	if len(r.Blocks) == 0 {
		return true
	}
	for _, c := range r.Blocks {
		if slices.Contains(req, c) {
			return true
		}
	}
	return false
}

// Judge applies the required capabilities req (nil means
// [DefaultRequirements]) to results and returns the judged copy: a failure that
// blocks none of the required capabilities becomes a warning (its failing
// findings too) whose summary says which --require would make it fail, and an
// unknown that concerns none of them says that it does not count. Every other
// result is returned as it is. Checks set Blocks; only Judge decides what fails
// the node.
func Judge(results []Result, req []Capability) []Result {
	req = requirements(req)
	out := slices.Clone(results)
	for i := range out {
		r := &out[i]
		if r.blocksAny(req) {
			continue
		}
		switch r.Status {
		case Fail:
			r.Status = Warn
			r.Findings = slices.Clone(r.Findings)
			for j := range r.Findings {
				if r.Findings[j].Status == Fail {
					r.Findings[j].Status = Warn
				}
			}
			r.Summary += " (fails with --require " + capabilityList(r.Blocks) + ")"
		case Unknown:
			if r.PerformanceOnly {
				r.Summary += " (does not count: it decides performance, not whether a capability works)"
				continue
			}
			r.Summary += " (does not count: it matters only with --require " + capabilityList(r.Blocks) + ")"
		}
	}
	return out
}

// capabilityList joins capabilities with commas, as --require takes them.
func capabilityList(cs []Capability) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = string(c)
	}
	return strings.Join(s, ",")
}
