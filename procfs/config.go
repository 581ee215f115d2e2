package procfs

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"strings"

	"github.com/p2pkit/p2pkit/hostfs"
)

// This file reads the kernel's build configuration: /proc/config.gz, which
// kernel/configs.c serves (CONFIG_IKCONFIG_PROC), or /boot/config-<release>.

// ConfigValue is the value of a bool or tristate kernel configuration option.
type ConfigValue uint8

// Kernel configuration values.
const (
	ConfigUnknown ConfigValue = iota // no configuration was found
	ConfigNo                         // "# CONFIG_X is not set", or absent from a found configuration
	ConfigYes                        // CONFIG_X=y
	ConfigModule                     // CONFIG_X=m
)

// String returns "unknown", "n", "y" or "m".
func (v ConfigValue) String() string {
	switch v {
	case ConfigNo:
		return "n"
	case ConfigYes:
		return "y"
	case ConfigModule:
		return "m"
	}
	return "unknown"
}

// MarshalText implements encoding.TextMarshaler with the String form.
func (v ConfigValue) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// KernelConfig is the running kernel's build configuration.
type KernelConfig struct {
	// Source is the file it came from, "/proc/config.gz" or "/boot/config-<release>";
	// empty when neither exists and nothing is known.
	Source string
	// Options maps each CONFIG_ name to its value as written: "y", "m", a number or a
	// quoted string. Options the file marks "is not set" map to "n".
	Options map[string]string
}

// Value returns the state of the bool or tristate option name (with its CONFIG_
// prefix). An option absent from a configuration that was found is ConfigNo, as
// Kconfig leaves options out whose dependencies are unmet.
func (k KernelConfig) Value(name string) ConfigValue {
	if k.Source == "" {
		return ConfigUnknown
	}
	switch k.Options[name] {
	case "y":
		return ConfigYes
	case "m":
		return ConfigModule
	}
	return ConfigNo
}

// KernelConfig reads the running kernel's configuration from /proc/config.gz
// (CONFIG_IKCONFIG_PROC) or, failing that, /boot/config-<release>, the release being
// that of /proc/version. When neither exists the result has an empty Source and no
// error.
func (fsys FS) KernelConfig() (KernelConfig, error) {
	const procConfig = "proc/config.gz"
	b, err := fsys.r.ReadFile(procConfig, procLimit)
	if ok, err := hostfs.Optional(err); err != nil {
		return KernelConfig{}, err
	} else if ok {
		opts, err := parseConfigGz(b)
		if err != nil {
			return KernelConfig{}, hostfs.PathError("parse", procConfig, err)
		}
		return KernelConfig{Source: "/" + procConfig, Options: opts}, nil
	}
	v, err := fsys.KernelVersion()
	if ok, err := hostfs.Optional(err); !ok {
		return KernelConfig{}, err
	}
	name := "boot/config-" + v.Release
	if strings.Contains(v.Release, "/") {
		return KernelConfig{}, hostfs.PathError("parse", "proc/version", fmt.Errorf("release %q holds a slash", v.Release))
	}
	b, err = fsys.r.ReadFile(name, procLimit)
	if ok, err := hostfs.Optional(err); !ok {
		return KernelConfig{}, err
	}
	return KernelConfig{Source: "/" + name, Options: parseConfig(b)}, nil
}

// parseConfigGz decompresses /proc/config.gz (kernel/configs.c), at most procLimit
// bytes of it, and parses it.
func parseConfigGz(b []byte) (map[string]string, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	text, err := io.ReadAll(io.LimitReader(zr, procLimit+1))
	if err != nil {
		return nil, err
	}
	if len(text) > procLimit {
		return nil, fmt.Errorf("%w (%d bytes)", hostfs.ErrTooLarge, procLimit)
	}
	return parseConfig(text), nil
}

// parseConfig parses a kernel .config: "CONFIG_X=value" and "# CONFIG_X is not set"
// lines; anything else is a comment.
func parseConfig(b []byte) map[string]string {
	m := map[string]string{}
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if name, ok := strings.CutPrefix(line, "# "); ok {
			if name, ok := strings.CutSuffix(name, " is not set"); ok && strings.HasPrefix(name, "CONFIG_") {
				m[name] = "n"
			}
			continue
		}
		if name, val, ok := strings.Cut(line, "="); ok && strings.HasPrefix(name, "CONFIG_") {
			m[name] = val
		}
	}
	return m
}
