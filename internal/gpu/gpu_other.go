//go:build !cgo || !linux

package gpu

import (
	"fmt"
	"runtime"
)

// Probe reports that this build cannot use NVML: go-nvml needs cgo and Linux.
func Probe() (*Facts, error) {
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("%w on %s", ErrNoNVML, runtime.GOOS)
	}
	return nil, fmt.Errorf("%w: built without cgo", ErrNoNVML)
}
