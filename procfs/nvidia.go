package procfs

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/hostfs"
)

// This file reads /proc/driver/nvidia/version, which the NVIDIA kernel driver prints
// (open-gpu-kernel-modules kernel-open/nvidia/nv-procfs.c).

// NVIDIADriver is the NVIDIA kernel driver's identity, /proc/driver/nvidia/version.
type NVIDIADriver struct {
	Version string // e.g. "580.159.04"
	Major   int    // the branch, 580
	// Open reports the open GPU kernel modules ("NVIDIA UNIX Open Kernel Module"),
	// false for the proprietary ones ("NVIDIA UNIX x86_64 Kernel Module").
	Open bool
	Line string // the NVRM version line as read
}

// NVIDIADriver reads /proc/driver/nvidia/version.
func (fsys FS) NVIDIADriver() (NVIDIADriver, error) {
	b, err := fsys.r.ReadFile("proc/driver/nvidia/version", procLimit)
	if err != nil {
		return NVIDIADriver{}, err
	}
	v, err := parseNVIDIAVersion(b)
	if err != nil {
		return NVIDIADriver{}, hostfs.PathError("parse", "proc/driver/nvidia/version", err)
	}
	return v, nil
}

// parseNVIDIAVersion parses the "NVRM version:" line the NVIDIA driver prints in
// /proc/driver/nvidia/version (open-gpu-kernel-modules kernel-open/nvidia/nv-procfs.c):
// the version is the first field made of digits and dots.
func parseNVIDIAVersion(b []byte) (NVIDIADriver, error) {
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, "NVRM version:")
		if !ok {
			continue
		}
		v := NVIDIADriver{Line: strings.TrimSpace(line), Open: strings.Contains(rest, "Open Kernel Module")}
		for _, f := range strings.Fields(rest) {
			major, _, dotted := strings.Cut(f, ".")
			if !dotted || strings.Trim(f, "0123456789.") != "" {
				continue
			}
			n, err := strconv.Atoi(major)
			if err != nil {
				continue
			}
			v.Version, v.Major = f, n
			return v, nil
		}
		return NVIDIADriver{}, fmt.Errorf("no version number in %q", v.Line)
	}
	return NVIDIADriver{}, errors.New("no \"NVRM version:\" line")
}
