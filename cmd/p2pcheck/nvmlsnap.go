package main

import (
	"encoding/json"
	"fmt"

	"github.com/p2pkit/p2pkit/gpu"
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
// When redacting, each GPU's UUID, which identifies the part, is replaced by
// "GPU-redacted-<index>".
func (o *globalOptions) nvmlRecord(redact bool) []byte {
	if o.nvmlSkip() != nil {
		return nil
	}
	f, err := probeNVML()
	if err != nil || f == nil {
		return nil
	}
	if redact {
		for i := range f.GPUs {
			if f.GPUs[i].UUID != "" {
				f.GPUs[i].UUID = fmt.Sprintf("GPU-redacted-%d", f.GPUs[i].Index)
			}
		}
	}
	b, err := json.Marshal(f)
	if err != nil {
		return nil
	}
	return b
}
