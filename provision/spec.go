package provision

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/pcie"
)

// DeviceSpec returns the device specifier of d for the ACS boot parameters in the
// path form that pci_dev_str_match_path() in drivers/pci/pci.c matches (since 4.19;
// Documentation/admin-guide/kernel-parameters.txt, "pci="): the function on the root
// bus above d with its domain and bus, then the device.function of each function on
// the way down to d, "0000:15:01.0/0.0/1.0". The kernel's own words for it: "more
// robust against bus renumbering" than a plain address. Only the root bus number
// appears, which the firmware assigns, not the kernel's enumeration; the numbers of
// the buses below a root port change when a card is added or removed there, which
// would make a plain address name another function or none, while the path stays
// the same as long as the slots do. A function whose path to the root bus was not
// read in full gets its plain address.
func DeviceSpec(d *pcie.Device) string {
	var chain []*pcie.Device
	for x := d; x != nil; x = x.Upstream() {
		if x.PathIncomplete || len(chain) > 256 {
			return d.Address.String()
		}
		chain = append(chain, x)
	}
	top := chain[len(chain)-1]
	if top.HostBridge == nil || top.Address.Bus != top.HostBridge.Bus {
		return d.Address.String()
	}
	var b strings.Builder
	b.WriteString(top.Address.String())
	for i := len(chain) - 2; i >= 0; i-- {
		fmt.Fprintf(&b, "/%x.%x", chain[i].Address.Device, chain[i].Address.Function)
	}
	return b.String()
}

// maxSpecs bounds the device specifiers MatchSpecs reads from one parameter.
const maxSpecs = 4096

// MatchSpecs returns the functions of t that a device list of
// pci=disable_acs_redir= or pci=config_acs= names, each with its flags string
// ("" for disable_acs_redir, which has none), as pci_dev_str_match() matches them:
// entries separated by ';' (',' also separates them, but pci_setup() already split
// the pci= value at commas), each "[<domain>:]<bus>:<dev>.<fn>[/<dev>.<fn>]*" or
// "pci:<vendor>:<device>[:<subvendor>:<subdevice>]" (IDs 0 match any). With flags
// true, each entry is "<flags>@<spec>". An entry that does not parse ends the list,
// as the kernel stops at it ("Can't parse ACS command line parameter"); bad reports
// whether that happened. The first entry that matches a function is the one the
// kernel applies to it.
func MatchSpecs(t *pcie.Topology, list string, flags bool) (match map[*pcie.Device]string, bad bool) {
	match = map[*pcie.Device]string{}
	entries := strings.Split(list, ";")
	if len(entries) > maxSpecs {
		entries, bad = entries[:maxSpecs], true
	}
	for _, e := range entries {
		if e == "" {
			continue
		}
		f, spec := "", e
		if flags {
			var ok bool
			f, spec, ok = strings.Cut(e, "@")
			if !ok || !validFlags(f) {
				return match, true
			}
		}
		m, ok := matcher(spec)
		if !ok {
			return match, true
		}
		for _, d := range t.Devices {
			if _, done := match[d]; !done && m(d) {
				match[d] = f
			}
		}
	}
	return match, bad
}

// validFlags reports a config_acs flags string the kernel accepts: 0, 1 and x (or
// X), at most the seven defined bits.
func validFlags(f string) bool {
	if f == "" || len(f) > 7 {
		return false
	}
	return strings.Trim(f, "01xX") == ""
}

// FlagsMask returns the mask and values a config_acs flags string sets: the
// rightmost character is bit 0, "x" leaves a bit out of the mask.
func FlagsMask(f string) (mask, value uint16) {
	for i := 0; i < len(f) && i < 16; i++ {
		bit := uint16(1) << i
		switch f[len(f)-1-i] {
		case '0':
			mask |= bit
		case '1':
			mask |= bit
			value |= bit
		}
	}
	return mask, value
}

// matcher returns the test of one device specifier.
func matcher(spec string) (func(*pcie.Device) bool, bool) {
	if ids, ok := strings.CutPrefix(spec, "pci:"); ok {
		return idMatcher(ids)
	}
	parts := strings.Split(spec, "/")
	top, ok := parseTop(parts[0])
	if !ok || len(parts) > 257 {
		return nil, false
	}
	path := make([][2]uint8, len(parts)-1)
	for i, p := range parts[1:] {
		dev, fn, ok := parseDevFn(p)
		if !ok {
			return nil, false
		}
		path[i] = [2]uint8{dev, fn}
	}
	return func(d *pcie.Device) bool {
		x := d
		for i := len(path) - 1; i >= 0; i-- {
			if x == nil || x.Address.Device != path[i][0] || x.Address.Function != path[i][1] {
				return false
			}
			x = x.Upstream()
		}
		return x != nil && x.Address == top
	}, true
}

// parseTop parses "[<domain>:]<bus>:<dev>.<fn>" as pci_dev_str_match_path() reads
// it with sscanf "%x:%x:%x.%x" (domain 0 when absent).
func parseTop(s string) (pcie.Address, bool) {
	f := strings.Split(s, ":")
	var dom uint64
	switch len(f) {
	case 3:
		var err error
		if dom, err = strconv.ParseUint(f[0], 16, 32); err != nil {
			return pcie.Address{}, false
		}
		f = f[1:]
	case 2:
	default:
		return pcie.Address{}, false
	}
	bus, err := strconv.ParseUint(f[0], 16, 8)
	if err != nil {
		return pcie.Address{}, false
	}
	dev, fn, ok := parseDevFn(f[1])
	if !ok {
		return pcie.Address{}, false
	}
	return pcie.Address{Domain: uint32(dom), Bus: uint8(bus), Device: dev, Function: fn}, true
}

func parseDevFn(s string) (dev, fn uint8, ok bool) {
	d, f, found := strings.Cut(s, ".")
	if !found {
		return 0, 0, false
	}
	dv, err1 := strconv.ParseUint(d, 16, 8)
	fv, err2 := strconv.ParseUint(f, 16, 8)
	if err1 != nil || err2 != nil || dv > 31 || fv > 7 {
		return 0, 0, false
	}
	return uint8(dv), uint8(fv), true
}

// idMatcher parses "<vendor>:<device>[:<subvendor>:<subdevice>]".
func idMatcher(s string) (func(*pcie.Device) bool, bool) {
	f := strings.Split(s, ":")
	if len(f) != 2 && len(f) != 4 {
		return nil, false
	}
	var ids [4]uint16
	for i, x := range f {
		v, err := strconv.ParseUint(x, 16, 16)
		if err != nil {
			return nil, false
		}
		ids[i] = uint16(v)
	}
	return func(d *pcie.Device) bool {
		r := d.Record
		return (ids[0] == 0 || ids[0] == r.Vendor) && (ids[1] == 0 || ids[1] == r.Device) &&
			(ids[2] == 0 || ids[2] == r.SubVendor) && (ids[3] == 0 || ids[3] == r.SubDevice)
	}, true
}
