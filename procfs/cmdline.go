package procfs

import (
	"slices"
	"strings"
)

// This file reads /proc/cmdline, which fs/proc/cmdline.c cmdline_proc_show prints,
// and splits it as the kernel does (lib/cmdline.c next_arg).

// Cmdline is the kernel command line, /proc/cmdline.
type Cmdline struct {
	Raw    string  // as read, newline removed
	Params []Param // in order, up to a lone "--" (what follows goes to init)
}

// Param is one kernel parameter, "name" or "name=value".
type Param struct {
	Name     string
	Value    string
	HasValue bool
}

// Lookup returns the value of the last parameter called name, the one the kernel acts
// on. Dashes and underscores in names are the same, as the kernel's parameq
// (kernel/params.c) treats them.
func (c Cmdline) Lookup(name string) (value string, ok bool) {
	for _, p := range slices.Backward(c.Params) {
		if paramEqual(p.Name, name) {
			return p.Value, true
		}
	}
	return "", false
}

// PCI returns the sub-options of every pci= parameter, in order. pci_setup
// (drivers/pci/pci.c) splits the value at commas, so
//
//	pci=noats,disable_acs_redir=0000:00:01.0;0000:00:02.0
//
// gives {noats} and {disable_acs_redir, "0000:00:01.0;0000:00:02.0"}.
func (c Cmdline) PCI() []Param {
	var out []Param
	for _, p := range c.Params {
		if p.Name != "pci" || !p.HasValue {
			continue
		}
		for _, opt := range strings.Split(p.Value, ",") {
			if opt == "" {
				continue
			}
			name, val, has := strings.Cut(opt, "=")
			out = append(out, Param{Name: name, Value: val, HasValue: has})
		}
	}
	return out
}

// PCIOption returns the value of the last pci= sub-option called name.
func (c Cmdline) PCIOption(name string) (value string, ok bool) {
	for _, p := range slices.Backward(c.PCI()) {
		if p.Name == name {
			return p.Value, true
		}
	}
	return "", false
}

func paramEqual(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i], b[i]
		if x == '-' {
			x = '_'
		}
		if y == '-' {
			y = '_'
		}
		if x != y {
			return false
		}
	}
	return true
}

// Cmdline reads /proc/cmdline.
func (fsys FS) Cmdline() (Cmdline, error) {
	b, err := fsys.r.ReadFile("proc/cmdline", procLimit)
	if err != nil {
		return Cmdline{}, err
	}
	return parseCmdline(b), nil
}

// parseCmdline splits a command line into parameters the way the kernel's next_arg
// (lib/cmdline.c) does: blanks separate parameters except inside double quotes, the
// first "=" separates name from value, and quotes around a value or a whole parameter
// are dropped.
func parseCmdline(b []byte) Cmdline {
	raw := strings.TrimRight(string(b), "\n\x00")
	c := Cmdline{Raw: raw}
	s := raw
	for {
		for s != "" && isBlank(s[0]) {
			s = s[1:]
		}
		if s == "" {
			break
		}
		inQuote := false
		i := 0
		for ; i < len(s); i++ {
			ch := s[i]
			if !inQuote && isBlank(ch) {
				break
			}
			if ch == '"' {
				inQuote = !inQuote
			}
		}
		arg := s[:i]
		s = s[i:]
		if arg == "--" {
			break
		}
		quoted := strings.HasPrefix(arg, `"`)
		arg = strings.TrimPrefix(arg, `"`)
		name, val, has := strings.Cut(arg, "=")
		switch {
		case has && strings.HasPrefix(val, `"`):
			val = strings.TrimSuffix(val[1:], `"`)
		case has && quoted:
			val = strings.TrimSuffix(val, `"`)
		case quoted:
			name = strings.TrimSuffix(name, `"`)
		}
		c.Params = append(c.Params, Param{Name: name, Value: val, HasValue: has})
	}
	return c
}

// isBlank reports the bytes the kernel's isspace (lib/ctype.c) calls space: the C
// white space characters and Latin-1 no-break space.
func isBlank(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\v', '\f', '\r', 0xa0:
		return true
	}
	return false
}
