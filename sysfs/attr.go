package sysfs

import (
	"bytes"
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/pcie"
)

// Parsers of the single-value attributes of /sys/bus/pci/devices/<bdf>
// (drivers/pci/pci-sysfs.c). Each takes the bytes as read, trailing newline included.

// attrString trims the newline and surrounding blanks of an attribute value.
func attrString(b []byte) string { return string(bytes.TrimSpace(b)) }

// parseHex parses a "0x%04x"-style value (vendor, device, subsystem_vendor,
// subsystem_device, revision, class) that must fit in bitSize bits.
func parseHex(b []byte, bitSize int) (uint64, error) {
	return hexValue(attrString(b), bitSize)
}

// hexValue parses "0x" followed by hexadecimal digits that fit in bitSize bits.
func hexValue(s string, bitSize int) (uint64, error) {
	digits, ok := strings.CutPrefix(s, "0x")
	if !ok || digits == "" || digits[0] == '+' || digits[0] == '-' {
		return 0, fmt.Errorf("want 0x-prefixed hex, got %q", s)
	}
	v, err := strconv.ParseUint(digits, 16, bitSize)
	if err != nil {
		return 0, fmt.Errorf("want 0x-prefixed hex of %d bits, got %q", bitSize, s)
	}
	return v, nil
}

// parseClass parses the class attribute, "0x%06x" (base<<16 | sub<<8 | prog-if).
func parseClass(b []byte) (uint32, error) {
	v, err := parseHex(b, 24)
	return uint32(v), err
}

// parseLinkSpeed parses current_link_speed and max_link_speed. Since Linux 5.7 the
// kernel prints pci_speed_string() (drivers/pci/probe.c): "2.5 GT/s PCIe", "5.0 GT/s
// PCIe", ... "64.0 GT/s PCIe"; older kernels printed "2.5 GT/s", "5 GT/s", "8 GT/s"
// and so on (drivers/pci/pci-sysfs.c). "Unknown" and "Unknown speed" mean the kernel
// could not tell and give speed 0 with no error.
func parseLinkSpeed(b []byte) (pcie.LinkSpeed, error) {
	s := attrString(b)
	if s == "" || s == "Unknown" || s == "Unknown speed" {
		return 0, nil
	}
	num, ok := strings.CutSuffix(strings.TrimSuffix(s, " PCIe"), " GT/s")
	if !ok {
		return 0, fmt.Errorf("unrecognised link speed %q", s)
	}
	switch num {
	case "2.5":
		return 1, nil
	case "5", "5.0":
		return 2, nil
	case "8", "8.0":
		return 3, nil
	case "16", "16.0":
		return 4, nil
	case "32", "32.0":
		return 5, nil
	case "64", "64.0":
		return 6, nil
	case "128", "128.0":
		return 7, nil
	}
	return 0, fmt.Errorf("unrecognised link speed %q", s)
}

// parseLinkWidth parses current_link_width and max_link_width, the "%u" of the
// Negotiated or Maximum Link Width field (pci-sysfs.c current_link_width_show). Widths
// the PCIe specification does not define (0 for a link that is down, 63 for an all-ones
// read) are unknown and give 0 with no error.
func parseLinkWidth(b []byte) (int, error) {
	s := attrString(b)
	w, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("want a link width, got %q", s)
	}
	switch w {
	case 1, 2, 4, 8, 12, 16, 32:
		return int(w), nil
	}
	return 0, nil
}

// parseNUMANode parses numa_node, "%d"; -1 means the firmware named no node.
func parseNUMANode(b []byte) (int, error) {
	s := attrString(b)
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < -1 {
		return 0, fmt.Errorf("want a NUMA node, got %q", s)
	}
	return int(n), nil
}

// parseAERTotal finds the line "key N" of an aer_dev_* attribute, which lists one
// "name count" line per error type and ends with the total
// (drivers/pci/pcie/aer.c aer_stats_dev_attr, e.g. "TOTAL_ERR_COR 37").
func parseAERTotal(b []byte, key string) (uint64, error) {
	for line := range strings.Lines(string(b)) {
		name, val, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || name != key {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(val), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: want a count, got %q", key, val)
		}
		return n, nil
	}
	return 0, fmt.Errorf("no %s line", key)
}

// parseDecimal parses a non-negative "%d", "%u" or "%zd" attribute such as
// sriov_totalvfs or p2pmem/size.
func parseDecimal(b []byte) (uint64, error) {
	s := attrString(b)
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want a decimal number, got %q", s)
	}
	return v, nil
}

// parseBool parses a "%d" flag that must be 0 or 1, such as p2pmem/published.
func parseBool(b []byte) (bool, error) {
	switch s := attrString(b); s {
	case "0":
		return false, nil
	case "1":
		return true, nil
	default:
		return false, fmt.Errorf("want 0 or 1, got %q", s)
	}
}

// parseResource parses the resource attribute (pci-sysfs.c resource_show): one line
// "0x%016llx 0x%016llx 0x%016llx" of start, end and flags per resource, in resource
// index order (BARs 0-5, the ROM, then bridge windows or SR-IOV BARs). Unused resources
// are all-zero lines and are left out; Index keeps each line's position.
func parseResource(b []byte) (out []pcie.Resource, unread []int, err error) {
	i := -1
	for line := range strings.SplitSeq(strings.TrimRight(string(b), "\n"), "\n") {
		i++
		if line == "" && i == 0 {
			break
		}
		if line == unusedResource {
			continue
		}
		r, used, lerr := parseResourceLine(i, line)
		if lerr != nil {
			unread = append(unread, i)
			if err == nil {
				err = lerr
			}
			continue
		}
		if used {
			out = append(out, r)
		}
	}
	return out, unread, err
}

// parseResourceLine parses line i of the resource file: start, end and flags in
// hex (resource_show in drivers/pci/pci-sysfs.c). An all-zero line is an unused
// BAR: used is false.
func parseResourceLine(i int, line string) (r pcie.Resource, used bool, err error) {
	var f [3]string
	n := 0
	for field := range strings.FieldsSeq(line) {
		if n == len(f) {
			n++
			break
		}
		f[n] = field
		n++
	}
	if n != len(f) {
		return pcie.Resource{}, false, fmt.Errorf("resource line %d: want start, end and flags, got %q", i, line)
	}
	var v [3]uint64
	for j, s := range f {
		if v[j], err = hexValue(s, 64); err != nil {
			return pcie.Resource{}, false, fmt.Errorf("resource line %d: %w", i, err)
		}
	}
	if v == [3]uint64{} {
		return pcie.Resource{}, false, nil
	}
	if v[1] < v[0] {
		return pcie.Resource{}, false, fmt.Errorf("resource line %d: end %#x before start %#x", i, v[1], v[0])
	}
	return pcie.Resource{Index: i, Start: v[0], End: v[1], Flags: v[2]}, true, nil
}

// unusedResource is the line resource_show prints for an unused resource, most of
// the lines of most functions.
const unusedResource = "0x0000000000000000 0x0000000000000000 0x0000000000000000"

// maxCPU bounds CPU numbers in CPU lists and masks (the kernel's NR_CPUS tops out at
// 8192; this leaves room and keeps a hostile "0-4000000000" from allocating).
const maxCPU = 1 << 16

// ParseCPUList parses a CPU list as the kernel prints it with "%*pbl"
// (lib/vsprintf.c bitmap_list_string), for example local_cpulist "0-3,8-11", into
// ascending CPU numbers. An empty list gives no CPUs.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	var cpus []int
	if s == "" {
		return cpus, nil
	}
	for _, r := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		first, err := strconv.ParseUint(lo, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("sysfs: cpu list %q: bad element %q", s, r)
		}
		last := first
		if isRange {
			if last, err = strconv.ParseUint(hi, 10, 32); err != nil {
				return nil, fmt.Errorf("sysfs: cpu list %q: bad element %q", s, r)
			}
		}
		if last < first || last >= maxCPU {
			return nil, fmt.Errorf("sysfs: cpu list %q: bad range %q", s, r)
		}
		if len(cpus) > 0 && int(first) <= cpus[len(cpus)-1] {
			return nil, fmt.Errorf("sysfs: cpu list %q: not ascending at %q", s, r)
		}
		for c := first; c <= last; c++ {
			cpus = append(cpus, int(c))
		}
	}
	return cpus, nil
}

// ParseCPUMask parses a CPU mask as the kernel prints it with "%*pb"
// (lib/vsprintf.c bitmap_string), for example local_cpus "ffffffff,00000000": 32-bit
// hexadecimal words separated by commas, most significant first. It returns the CPUs
// set, ascending.
func ParseCPUMask(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	words := strings.Split(s, ",")
	if len(words)*32 > maxCPU {
		return nil, fmt.Errorf("sysfs: cpu mask %q: more than %d CPUs", s, maxCPU)
	}
	var cpus []int
	for i := len(words) - 1; i >= 0; i-- {
		w := words[i]
		if w == "" || len(w) > 8 {
			return nil, fmt.Errorf("sysfs: cpu mask %q: bad word %q", s, w)
		}
		v, err := strconv.ParseUint(w, 16, 32)
		if err != nil {
			return nil, fmt.Errorf("sysfs: cpu mask %q: bad word %q", s, w)
		}
		base := (len(words) - 1 - i) * 32
		for v != 0 {
			b := bits.TrailingZeros64(v)
			cpus = append(cpus, base+b)
			v &^= 1 << b
		}
	}
	return cpus, nil
}

// IOMMUDomainType is the default domain type of an IOMMU group, the type attribute of
// /sys/kernel/iommu_groups/<n> (drivers/iommu/iommu.c iommu_group_show_type).
type IOMMUDomainType uint8

// IOMMU default domain types.
const (
	IOMMUUnknown   IOMMUDomainType = iota // "unknown", or no default domain
	IOMMUBlocked                          // "blocked": all DMA is blocked
	IOMMUIdentity                         // "identity": passthrough, DMA addresses are physical
	IOMMUUnmanaged                        // "unmanaged": owned by a user such as VFIO
	IOMMUDMA                              // "DMA": translated, strict invalidation
	IOMMUDMAFQ                            // "DMA-FQ": translated, flush queue (lazy)

	// IOMMUNotRead is the type of a group whose type attribute was not read (see
	// FS.IOMMUGroups). It is no value of the kernel's.
	IOMMUNotRead IOMMUDomainType = 255
)

var iommuTypeNames = [...]string{
	IOMMUUnknown:   "unknown",
	IOMMUBlocked:   "blocked",
	IOMMUIdentity:  "identity",
	IOMMUUnmanaged: "unmanaged",
	IOMMUDMA:       "DMA",
	IOMMUDMAFQ:     "DMA-FQ",
}

// String returns the name sysfs uses.
func (t IOMMUDomainType) String() string {
	if t == IOMMUNotRead {
		return "not read"
	}
	if int(t) < len(iommuTypeNames) {
		return iommuTypeNames[t]
	}
	return "IOMMUDomainType(" + strconv.Itoa(int(t)) + ")"
}

// MarshalText implements encoding.TextMarshaler with the sysfs name.
func (t IOMMUDomainType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// Translated reports whether DMA through a group of this type is remapped by the
// IOMMU, the case in which peer-to-peer traffic between devices has to be mapped.
func (t IOMMUDomainType) Translated() bool { return t == IOMMUDMA || t == IOMMUDMAFQ }

// parseIOMMUDomainType parses an IOMMU group's type attribute.
func parseIOMMUDomainType(b []byte) (IOMMUDomainType, error) {
	s := attrString(b)
	for t, name := range iommuTypeNames {
		if s == name {
			return IOMMUDomainType(t), nil
		}
	}
	return IOMMUUnknown, fmt.Errorf("unrecognised iommu group type %q", s)
}
