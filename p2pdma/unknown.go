package p2pdma

import (
	"github.com/p2pkit/p2pkit/pcie"
)

// UnknownKind says which fact a verdict could not read. Callers decide on the kind,
// never on the sentence [UnknownFact.String] makes of it.
type UnknownKind uint8

// Kinds of unknown facts.
const (
	// ACSUnread: the ACS Control register of Device was not read (config space past
	// 64 bytes needs CAP_SYS_ADMIN).
	ACSUnread UnknownKind = iota + 1
	// PortTypeUnread: the PCI Express port type of Device, the first function on the
	// root bus of a host bridge, was not read; the kernel looks it up in the
	// whitelist only if it is a Root Port.
	PortTypeUnread
	// WhitelistVersion: the host bridge's whitelist entry exists from one Linux
	// release on, and the analysed kernel lies in between or is unknown.
	WhitelistVersion
	// OldKernelRules: the analysed kernel (before 5.9) decides host-bridge paths by
	// rules that are not modelled.
	OldKernelRules
	// HostBridgeUnknown: the host bridge of the provider or the client is not known.
	HostBridgeUnknown
	// TreeLoop: the upstream chain of the provider or the client does not end.
	TreeLoop
	// ParentUnknown: the parent of Device is not known (its sysfs path names a bridge
	// that was not read, or a loop); see [CheckComplete].
	ParentUnknown
	// NotInTopology: the provider or the client is not in the topology.
	NotInTopology
	// TreeImpossible: Device sits below an endpoint (pcie.Device.BelowEndpoint), a
	// tree the kernel cannot build: it scans a secondary bus only below a bridge.
	TreeImpossible
)

// UnknownFact is one fact a verdict depends on that could not be read.
type UnknownFact struct {
	Kind UnknownKind
	// Device is the function whose fact is missing, for ACSUnread, PortTypeUnread,
	// ParentUnknown and TreeImpossible; nil otherwise.
	Device *pcie.Address
	// Detail is the sentence of kinds whose wording needs more than Device (which
	// whitelist entry, which kernel); empty for the others, whose sentence String
	// makes from Kind and Device.
	Detail string
}

// String says what is unknown, for people.
func (u UnknownFact) String() string {
	if u.Detail != "" {
		return u.Detail
	}
	dev := "?"
	if u.Device != nil {
		dev = u.Device.String()
	}
	switch u.Kind {
	case ACSUnread:
		return "ACS Control of " + dev + " was not read (config space past 64 bytes needs CAP_SYS_ADMIN)"
	case PortTypeUnread:
		return "the PCI Express port type of " + dev + " was not read (needs CAP_SYS_ADMIN)"
	case WhitelistVersion:
		return "whether the host bridge is in this kernel's P2PDMA whitelist is unknown"
	case OldKernelRules:
		return "host-bridge rules of Linux before 5.9 are not modelled"
	case HostBridgeUnknown:
		return "host bridge not known"
	case TreeLoop:
		return "the tree has a loop"
	case ParentUnknown:
		return "the parent of " + dev + " is not known (its sysfs path names a bridge that was not read, or a loop)"
	case NotInTopology:
		return notInTopology
	case TreeImpossible:
		return dev + " sits below an endpoint, which has no secondary bus (a tree the kernel cannot build)"
	}
	return "unknown"
}

// MarshalText writes the sentence, as the pairs JSON shows unknowns.
func (u UnknownFact) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

const notInTopology = "the provider or the client is not in the topology"

// HasUnknown reports whether one of v's unknowns is of kind k.
func (v *Verdict) HasUnknown(k UnknownKind) bool {
	for _, u := range v.Unknowns {
		if u.Kind == k {
			return true
		}
	}
	return false
}
