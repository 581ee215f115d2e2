package procfs

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/hostfs"
)

// This file reads /proc/driver/nvidia/params, where the NVIDIA kernel driver
// prints each of its options as "Name: value", strings quoted
// (open-gpu-kernel-modules kernel-open/nvidia/nv-procfs.c nv_procfs_read_params;
// the options are those of kernel-open/nvidia/nv-reg.h, NVreg_<Name> as module
// options).

// NVIDIAParams are the NVIDIA driver's options as it runs with them.
type NVIDIAParams struct {
	// Values maps each option name ("EnableResizableBar", "RegistryDwords") to its
	// value as printed, quotes removed.
	Values map[string]string
}

// NVIDIAParams reads /proc/driver/nvidia/params.
func (fsys FS) NVIDIAParams() (NVIDIAParams, error) {
	b, err := fsys.r.ReadFile("proc/driver/nvidia/params", procLimit)
	if err != nil {
		return NVIDIAParams{}, err
	}
	return parseNVIDIAParams(b), nil
}

// parseNVIDIAParams parses the "Name: value" lines of /proc/driver/nvidia/params;
// a value in double quotes loses them. Lines without a colon are skipped.
func parseNVIDIAParams(b []byte) NVIDIAParams {
	m := parseKeyValues(b)
	for k, v := range m {
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			m[k] = v[1 : len(v)-1]
		}
	}
	return NVIDIAParams{Values: m}
}

// Uint returns option name as a number (decimal, or hex with 0x as the driver
// takes it); ok is false when it is absent or not a number.
func (p NVIDIAParams) Uint(name string) (uint32, bool) {
	v, ok := p.Values[name]
	if !ok {
		return 0, false
	}
	n, err := parseDword(v)
	return n, err == nil
}

// RegistryDword is one key=value pair of NVreg_RegistryDwords.
type RegistryDword struct {
	Key   string
	Value uint32
	// Raw is the value as written; Err is set when it is not a number.
	Raw string
	Err error
}

// RegistryDwords returns the pairs of the RegistryDwords option, in order:
// "key=value;key=value", each value a DWORD in decimal or 0x hex (nv-reg.h,
// Option: RegistryDwords). A pair without "=" is kept with an error.
func (p NVIDIAParams) RegistryDwords() []RegistryDword {
	var out []RegistryDword
	for _, kv := range strings.Split(p.Values["RegistryDwords"], ";") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		d := RegistryDword{Key: strings.TrimSpace(k), Raw: strings.TrimSpace(v)}
		if !ok {
			d.Err = hostfs.PathError("parse", "proc/driver/nvidia/params", fmt.Errorf("RegistryDwords pair %q has no value", kv))
		} else if n, err := parseDword(d.Raw); err != nil {
			d.Err = err
		} else {
			d.Value = n
		}
		out = append(out, d)
	}
	return out
}

// parseDword reads a DWORD as the NVIDIA driver writes and takes them: decimal,
// or hex after 0x.
func parseDword(s string) (uint32, error) {
	base := 10
	if h, ok := strings.CutPrefix(strings.ToLower(s), "0x"); ok {
		s, base = h, 16
	}
	n, err := strconv.ParseUint(s, base, 32)
	return uint32(n), err
}
