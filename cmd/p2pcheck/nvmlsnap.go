package main

import (
	"encoding/json"

	"github.com/p2pkit/p2pkit/internal/gpu"
)

// Seams for tests: how NVML is asked, and whether a --root tree may stand for the
// machine NVML describes (a test injects the facts of a fixture that way).
var (
	probeNVML      = gpu.Probe
	probeNVMLLinks = gpu.ProbeLinks
	nvmlOnRoot     = false
)

// nvmlRecord asks NVML for the facts a snapshot records, where p2pcheck would ask it
// live, and returns them as JSON; nil when NVML is not asked or does not answer.
func (o *globalOptions) nvmlRecord() []byte {
	if o.nvmlSkip() != nil {
		return nil
	}
	f, err := probeNVML()
	if err != nil || f == nil {
		return nil
	}
	b, err := json.Marshal(f)
	if err != nil {
		return nil
	}
	return b
}
