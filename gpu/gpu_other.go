//go:build !cgo || !linux

package gpu

import (
	"fmt"
	"runtime"
)

// Probe reports that this build cannot use NVML: go-nvml needs cgo and Linux.
func Probe() (*Facts, error) { return noNVML() }

// ProbeLinks reports that this build cannot use NVML.
func ProbeLinks() (*Facts, error) { return noNVML() }

func noNVML() (*Facts, error) {
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("%w on %s", ErrNoNVML, runtime.GOOS)
	}
	return nil, fmt.Errorf("%w: built without cgo", ErrNoNVML)
}

// BuiltIn says whether this build can use NVML (go-nvml needs cgo and Linux).
const BuiltIn = false
