package nccl

import (
	"bufio"
	"bytes"
	"maps"
	"slices"
	"strings"
)

// Where a setting came from, highest precedence first.
const (
	SourceAssume      = "--assume"
	SourceEnvironment = "environment"
)

// Setting is one NCCL_* variable in effect and where it came from: SourceAssume,
// SourceEnvironment, or the path of the configuration file that set it.
type Setting struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Source string `json:"source"`
}

// Settings are the NCCL_* variables NCCL will see. The zero value has none.
type Settings struct {
	vars map[string]Setting
}

// ConfFile is one configuration file as read: its path and contents.
type ConfFile struct {
	Path string
	Data []byte
}

// maxConfBytes bounds what ParseConf reads of one file.
const maxConfBytes = 1 << 20

// ParseConf reads an NCCL configuration file as setEnvFile (src/misc/param.cc) does:
// one NAME=value per line; a line starting with '#' is a comment; a line without
// '=' is skipped; the name is everything before the first '=' and the value the
// rest of the line (only the newline is removed, no spaces are trimmed); names and
// values are cut at 1023 bytes. Later lines do not override earlier ones for the
// same name (setenv without overwrite). Only the first maxConfBytes are read.
func ParseConf(data []byte) []Setting {
	if len(data) > maxConfBytes {
		data = data[:maxConfBytes]
	}
	var out []Setting
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxConfBytes+1)
	sc.Split(scanLinesKeepCR)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		// getline stops at a NUL for C string purposes.
		if i := strings.IndexByte(line, 0); i >= 0 {
			line = line[:i]
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok || name == "" {
			continue
		}
		name, value = cut(name, 1023), cut(value, 1023)
		if seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, Setting{Name: name, Value: value})
	}
	return out
}

// scanLinesKeepCR splits at '\n' only, so a '\r' stays in the value as in NCCL.
func scanLinesKeepCR(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// ConfPaths returns the configuration files NCCL reads, in precedence order, as
// initEnvFunc (src/misc/param.cc) picks them: the file NCCL_CONF_FILE names when it
// is set and not empty, otherwise ~/.nccl.conf of the user (home); then
// /etc/nccl.conf. env holds the variables NCCL_CONF_FILE may come from.
func ConfPaths(env map[string]string, home string) []string {
	var paths []string
	if f := env["NCCL_CONF_FILE"]; f != "" {
		paths = append(paths, f)
	} else if home != "" {
		paths = append(paths, strings.TrimSuffix(home, "/")+"/.nccl.conf")
	}
	return append(paths, "/etc/nccl.conf")
}

// notParams are NCCL_* variables that are not NCCL parameters: NVIDIA's containers
// set NCCL_VERSION to document the NCCL they ship; NCCL itself never reads it.
var notParams = []string{"NCCL_VERSION"}

// ResolveSettings merges what NCCL will see, highest precedence first: the what-if
// values (--assume), the process environment, then each configuration file in
// ConfPaths order. Configuration files only fill names still unset (NCCL calls
// setenv without overwriting). Only NCCL_* names are kept.
func ResolveSettings(assume, env map[string]string, files []ConfFile) Settings {
	s := Settings{vars: map[string]Setting{}}
	add := func(name, value, src string) {
		if !strings.HasPrefix(name, "NCCL_") || slices.Contains(notParams, name) {
			return
		}
		if _, ok := s.vars[name]; !ok {
			s.vars[name] = Setting{Name: name, Value: value, Source: src}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(assume)) {
		add(k, assume[k], SourceAssume)
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		add(k, env[k], SourceEnvironment)
	}
	for _, f := range files {
		for _, v := range ParseConf(f.Data) {
			add(v.Name, v.Value, f.Path)
		}
	}
	return s
}

// With returns a copy of s with name set to value from src.
func (s Settings) With(name, value, src string) Settings {
	c := Settings{vars: maps.Clone(s.vars)}
	if c.vars == nil {
		c.vars = map[string]Setting{}
	}
	c.vars[name] = Setting{Name: name, Value: value, Source: src}
	return c
}

// Get returns the setting of name.
func (s Settings) Get(name string) (Setting, bool) {
	v, ok := s.vars[name]
	return v, ok
}

// All returns every setting, sorted by name.
func (s Settings) All() []Setting {
	out := make([]Setting, 0, len(s.vars))
	for _, k := range slices.Sorted(maps.Keys(s.vars)) {
		out = append(out, s.vars[k])
	}
	return out
}

// Int is an integer parameter as ncclLoadParam (src/misc/param.cc) reads it: unset
// or empty gives def; otherwise strtoll with base 0, and def again when the number
// overflows. Like NCCL, trailing garbage is ignored ("1x" is 1).
func (s Settings) Int(name string, def int64) int64 {
	v, ok := s.vars[name]
	if !ok || v.Value == "" {
		return def
	}
	n, overflow := strtoll(v.Value)
	if overflow {
		return def
	}
	return n
}
