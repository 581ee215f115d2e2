package p2pdma

import (
	"fmt"

	"github.com/p2pkit/p2pkit/kversion"
)

// WhitelistEntry is one row of pci_p2pdma_whitelist[] in drivers/pci/p2pdma.c: a host
// bridge, identified by the vendor and device ID of the first function on its root
// bus, through which the kernel lets peer-to-peer traffic pass.
type WhitelistEntry struct {
	Vendor, Device uint16
	// AnyDevice is the kernel's PCI_ANY_ID in the device field (7.1 and later): every
	// device of the vendor matches.
	AnyDevice bool
	// SameHostBridge is the kernel's REQ_SAME_HOST_BRIDGE flag: the entry allows traffic
	// only between devices below the same host bridge.
	SameHostBridge bool
	// Since is the first release known to carry the entry and After the last one known
	// not to (zero: none modelled lacks it). A kernel strictly between the two may or
	// may not have it.
	After, Since kversion.Version
	// Comment names the hardware, as the kernel's table comment does.
	Comment string
}

// String returns "vvvv:dddd" (or "vvvv:*" for AnyDevice).
func (e WhitelistEntry) String() string {
	if e.AnyDevice {
		return fmt.Sprintf("%04x:*", e.Vendor)
	}
	return fmt.Sprintf("%04x:%04x", e.Vendor, e.Device)
}

func (e WhitelistEntry) matches(vendor, device uint16) bool {
	return e.Vendor == vendor && (e.AnyDevice || e.Device == device)
}

// presence tells whether a kernel of version v has the entry: yes, no, or maybe (v is
// between After and Since, or v is unknown and the entry came after the baseline).
func (e WhitelistEntry) presence(v kversion.Version) tri {
	if v.IsZero() {
		if e.Since.Compare(kernelBaseline) <= 0 {
			return yes
		}
		return maybe
	}
	switch {
	case v.Compare(e.Since) >= 0:
		return yes
	case v.Compare(e.After) <= 0:
		return no
	}
	return maybe
}

// whitelist is every entry known. No two entries match one device, so their order,
// which the kernel's first-match lookup would depend on, does not matter. The first
// block is the table of Linux 6.1 (identical in 6.2 through 7.0); every entry is
// tagged with the release that added it.
var whitelist = func() []WhitelistEntry {
	entry := func(dev uint16, same bool, since, after kversion.Version, comment string) WhitelistEntry {
		return WhitelistEntry{Vendor: 0x8086, Device: dev, SameHostBridge: same,
			After: after, Since: since, Comment: comment}
	}
	// The Xeon E5/E7 entries came with the 5.5 rework and the Skylake-E ones in 2020
	// (commits bc123a515cb7, 7b94b53db34f), all before 5.9, the oldest release
	// modelled; Ice Lake-SP's 09a2 came in 5.18 (commit feaea1fe8b36).
	none, floor := kversion.Version{}, kernelCPURule
	tab := []WhitelistEntry{
		entry(0x3c00, true, floor, none, "Intel Xeon E5/Core i7"),
		entry(0x3c01, true, floor, none, "Intel Xeon E5/Core i7"),
		entry(0x2f00, true, floor, none, "Intel Xeon E7 v3/Xeon E5 v3/Core i7"),
		entry(0x2f01, true, floor, none, "Intel Xeon E7 v3/Xeon E5 v3/Core i7"),
		entry(0x2030, false, floor, none, "Intel Skylake-E root port A"),
		entry(0x2031, false, floor, none, "Intel Skylake-E root port B"),
		entry(0x2032, false, floor, none, "Intel Skylake-E root port C"),
		entry(0x2033, false, floor, none, "Intel Skylake-E root port D"),
		entry(0x2020, false, floor, none, "Intel Skylake-E"),
		entry(0x09a2, false, kversion.Version{Major: 5, Minor: 18}, kversion.Version{Major: 5, Minor: 17}, "Intel Ice Lake-SP and newer Xeons"),
	}
	// Intel accelerators that sit alone on their root bus: upstream commit
	// 0ba76b19fd4c in 7.2, backported to 7.1.y (so 7.1 is "maybe").
	for _, dev := range []uint16{0x0b25, 0x0cfe, 0x11fb, 0x1212, 0x1216, 0x4940, 0x4942, 0x4944, 0x4946, 0x4948} {
		tab = append(tab, WhitelistEntry{Vendor: 0x8086, Device: dev,
			After: kversion.Version{Major: 7, Minor: 0}, Since: kversion.Version{Major: 7, Minor: 2},
			Comment: "Intel DSA/IAA/QAT, first device on its own root bus"})
	}
	// Google SoCs, vendor wildcard (commits 70cf146a674c, 1a1f96e3e2a8, 7.1).
	tab = append(tab, WhitelistEntry{Vendor: 0x1ae0, AnyDevice: true,
		After: kversion.Version{Major: 7, Minor: 0}, Since: kversion.Version{Major: 7, Minor: 1}, Comment: "Google SoCs"})
	// Queued in the PCI maintainer tree after 7.3-rc1, expected in 7.4.
	next, after := kversion.Version{Major: 7, Minor: 4}, kversion.Version{Major: 7, Minor: 3}
	for _, dev := range []uint16{0x2f95, 0x2f96, 0x2f97, 0x2f98} {
		tab = append(tab, WhitelistEntry{Vendor: 0x10de, Device: dev, After: after, Since: next,
			Comment: "NVIDIA CPUs"})
	}
	for _, dev := range []uint16{0x1003, 0x1005, 0x1006, 0x1007} {
		tab = append(tab, WhitelistEntry{Vendor: 0x1d17, Device: dev, SameHostBridge: true,
			After: after, Since: next, Comment: "Zhaoxin KX-6000/KH-40000/KX-6000G/KX-7000"})
	}
	tab = append(tab, WhitelistEntry{Vendor: 0x1d17, Device: 0x1008, After: after, Since: next,
		Comment: "Zhaoxin KH-50000"})
	return tab
}()

// whitelistFor returns the host-bridge whitelist of kernel version v: the entries that
// release certainly has. The zero version gives the 6.1
// table. Entries whose release is not pinned for v (see WhitelistEntry.After) are left
// out; the Calculator reports verdicts that hinge on them as Unknown.
func whitelistFor(v kversion.Version) []WhitelistEntry {
	var out []WhitelistEntry
	for _, e := range whitelist {
		if e.presence(v) == yes {
			out = append(out, e)
		}
	}
	return out
}

// tri is a three-valued truth.
type tri uint8

const (
	no tri = iota
	yes
	maybe
)
