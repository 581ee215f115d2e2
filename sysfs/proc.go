package sysfs

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/kversion"
)

// Readers and parsers of /proc files. Each FS method returns an error wrapping
// fs.ErrNotExist when its file is absent.

// CPUInfo is what p2pkit needs of /proc/cpuinfo: the identity of CPU 0, the boot CPU
// whose vendor and family the kernel's P2PDMA host-bridge rule looks at
// (drivers/pci/p2pdma.c cpu_supports_p2pdma), and its flags.
type CPUInfo struct {
	VendorID  string   // vendor_id, e.g. "GenuineIntel", "AuthenticAMD"; empty off x86
	Family    int      // cpu family, decimal (0x17 = 23 is AMD Zen); 0 when absent
	Model     int      // model, decimal; 0 when absent
	ModelName string   // model name
	Flags     []string // flags (x86) or Features (arm64)
	CPUs      int      // number of processor entries
}

// HasFlag reports whether CPU 0 lists flag.
func (c CPUInfo) HasFlag(flag string) bool { return slices.Contains(c.Flags, flag) }

// Hypervisor reports whether the kernel runs under a hypervisor: x86 CPUs set the
// "hypervisor" flag (CPUID.1:ECX bit 31) in a guest.
func (c CPUInfo) Hypervisor() bool { return c.HasFlag("hypervisor") }

// CPUInfo reads /proc/cpuinfo.
func (fsys FS) CPUInfo() (CPUInfo, error) {
	b, err := fsys.readFile("proc/cpuinfo", procLimit)
	if err != nil {
		return CPUInfo{}, err
	}
	c, err := parseCPUInfo(b)
	if err != nil {
		return CPUInfo{}, pathErr("parse", "proc/cpuinfo", err)
	}
	return c, nil
}

// parseCPUInfo parses /proc/cpuinfo (arch/x86/kernel/cpu/proc.c show_cpuinfo;
// arch/arm64/kernel/cpuinfo.c c_show): blocks of "key<tabs>: value" lines separated by
// blank lines, the first block being CPU 0.
func parseCPUInfo(b []byte) (CPUInfo, error) {
	var c CPUInfo
	first := true
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, procLimit)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			if c.CPUs > 0 {
				first = false
			}
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue // arm64 and others print free-form lines; they carry nothing needed
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if key == "processor" {
			c.CPUs++
			continue
		}
		if !first {
			continue
		}
		var err error
		switch key {
		case "vendor_id":
			c.VendorID = val
		case "cpu family":
			c.Family, err = strconv.Atoi(val)
		case "model":
			c.Model, err = strconv.Atoi(val)
		case "model name":
			c.ModelName = val
		case "flags", "Features":
			c.Flags = strings.Fields(val)
		}
		if err != nil {
			return CPUInfo{}, fmt.Errorf("%s: want a decimal number, got %q", key, val)
		}
	}
	if err := sc.Err(); err != nil {
		return CPUInfo{}, err
	}
	if c.CPUs == 0 {
		return CPUInfo{}, errors.New("no processor entry")
	}
	return c, nil
}

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
	b, err := fsys.readFile("proc/cmdline", procLimit)
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

// KernelVersion reads /proc/version.
func (fsys FS) KernelVersion() (kversion.Version, error) {
	b, err := fsys.readFile("proc/version", procLimit)
	if err != nil {
		return kversion.Version{}, err
	}
	v, err := parseProcVersion(b)
	if err != nil {
		return kversion.Version{}, pathErr("parse", "proc/version", err)
	}
	return v, nil
}

// parseProcVersion parses /proc/version (fs/proc/version.c, linux_proc_banner):
// "Linux version <release> (<builder>) ...".
func parseProcVersion(b []byte) (kversion.Version, error) {
	f := strings.Fields(string(b))
	if len(f) < 3 || f[0] != "Linux" || f[1] != "version" {
		return kversion.Version{}, fmt.Errorf("want \"Linux version <release>\", got %.40q", string(b))
	}
	return kversion.Parse(f[2])
}

// Module is one line of /proc/modules.
type Module struct {
	Name     string
	Size     uint64
	RefCount int      // -1 when the kernel cannot unload modules and prints "-"
	UsedBy   []string // modules that depend on this one
	State    string   // "Live", "Loading" or "Unloading"
	Taints   string   // e.g. "OE", empty when untainted
}

// Modules reads /proc/modules.
func (fsys FS) Modules() ([]Module, error) {
	b, err := fsys.readFile("proc/modules", procLimit)
	if err != nil {
		return nil, err
	}
	m, err := parseModules(b)
	if err != nil {
		return nil, pathErr("parse", "proc/modules", err)
	}
	return m, nil
}

// parseModules parses /proc/modules (kernel/module/procfs.c m_show): "name size
// refcount deps state address [(taints)]" per line, deps being "-" or "a,b,".
func parseModules(b []byte) ([]Module, error) {
	mods := []Module{}
	for i, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 5 {
			return nil, fmt.Errorf("line %d: want name, size, refcount, deps and state, got %q", i+1, line)
		}
		m := Module{Name: f[0], State: f[4], RefCount: -1}
		var err error
		if m.Size, err = strconv.ParseUint(f[1], 10, 64); err != nil {
			return nil, fmt.Errorf("line %d: bad size %q", i+1, f[1])
		}
		if f[2] != "-" {
			if m.RefCount, err = strconv.Atoi(f[2]); err != nil || m.RefCount < 0 {
				return nil, fmt.Errorf("line %d: bad refcount %q", i+1, f[2])
			}
		}
		if f[3] != "-" {
			for _, d := range strings.Split(f[3], ",") {
				if d != "" {
					m.UsedBy = append(m.UsedBy, d)
				}
			}
		}
		if len(f) > 6 {
			m.Taints = strings.Trim(f[6], "()")
		}
		mods = append(mods, m)
	}
	return mods, nil
}

// CharDevice is one entry of the "Character devices:" part of /proc/devices.
type CharDevice struct {
	Major uint32
	Name  string // e.g. "gdrdrv", "nvidia", "nvidia-uvm"
}

// CharDevices reads the character device majors of /proc/devices.
func (fsys FS) CharDevices() ([]CharDevice, error) {
	b, err := fsys.readFile("proc/devices", procLimit)
	if err != nil {
		return nil, err
	}
	d, err := parseCharDevices(b)
	if err != nil {
		return nil, pathErr("parse", "proc/devices", err)
	}
	return d, nil
}

// LookupMajor returns the major number registered under name: register_chrdev's name
// (gdrdrv registers "gdrdrv" with a dynamic major). A name can hold several majors;
// the first listed, the lowest, is returned.
func LookupMajor(devs []CharDevice, name string) (major uint32, ok bool) {
	for _, d := range devs {
		if d.Name == name {
			return d.Major, true
		}
	}
	return 0, false
}

// parseCharDevices parses the "Character devices:" part of /proc/devices
// (fs/char_dev.c chrdev_show, "%3d %s").
func parseCharDevices(b []byte) ([]CharDevice, error) {
	devs := []CharDevice{}
	in := false
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		switch {
		case line == "Character devices:":
			in = true
			continue
		case line == "" || strings.HasSuffix(line, ":"):
			in = false
			continue
		case !in:
			continue
		}
		num, name, ok := strings.Cut(line, " ")
		major, err := strconv.ParseUint(num, 10, 32)
		if !ok || err != nil || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("want \"major name\", got %q", line)
		}
		devs = append(devs, CharDevice{Major: uint32(major), Name: strings.TrimSpace(name)})
	}
	return devs, nil
}

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
	b, err := fsys.readFile("proc/driver/nvidia/version", procLimit)
	if err != nil {
		return NVIDIADriver{}, err
	}
	v, err := parseNVIDIAVersion(b)
	if err != nil {
		return NVIDIADriver{}, pathErr("parse", "proc/driver/nvidia/version", err)
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

// GDRDrvParams reads /proc/driver/gdrdrv/params (gdrcopy 2.5 and later).
func (fsys FS) GDRDrvParams() (map[string]string, error) {
	b, err := fsys.readFile("proc/driver/gdrdrv/params", procLimit)
	if err != nil {
		return nil, err
	}
	return parseKeyValues(b), nil
}

// parseKeyValues parses "key: value" lines such as those of /proc/driver/gdrdrv/params
// (gdrcopy src/gdrdrv/gdrdrv.c gdrdrv_proc_params_read: "Version: 2.5", "Built for
// NVIDIA driver flavor: opensource", "Use persistent mapping: yes", "dbg_enabled: 0").
// Lines without a colon are skipped.
func parseKeyValues(b []byte) map[string]string {
	m := map[string]string{}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(k) == "" {
			continue
		}
		m[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return m
}

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
	b, err := fsys.readFile(procConfig, procLimit)
	if ok, err := optional(err); err != nil {
		return KernelConfig{}, err
	} else if ok {
		opts, err := parseConfigGz(b)
		if err != nil {
			return KernelConfig{}, pathErr("parse", procConfig, err)
		}
		return KernelConfig{Source: "/" + procConfig, Options: opts}, nil
	}
	v, err := fsys.KernelVersion()
	if ok, err := optional(err); !ok {
		return KernelConfig{}, err
	}
	name := "boot/config-" + v.Release
	if strings.Contains(v.Release, "/") {
		return KernelConfig{}, pathErr("parse", "proc/version", fmt.Errorf("release %q holds a slash", v.Release))
	}
	b, err = fsys.readFile(name, procLimit)
	if ok, err := optional(err); !ok {
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
		return nil, fmt.Errorf("%w (%d bytes)", errTooLarge, procLimit)
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
