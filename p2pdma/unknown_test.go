package p2pdma

import (
	"encoding/json"
	"testing"

	"github.com/p2pkit/p2pkit/pcie"
)

// TestUnknownFactString: each kind says what is unknown; a Detail, where the
// wording needs more than the function, wins; the JSON is the sentence.
func TestUnknownFactString(t *testing.T) {
	a := pcie.Address{Bus: 0x17}
	for _, tt := range []struct {
		u    UnknownFact
		want string
	}{
		{UnknownFact{Kind: ACSUnread, Device: &a}, "ACS Control of 0000:17:00.0 was not read (config space past 64 bytes needs CAP_SYS_ADMIN)"},
		{UnknownFact{Kind: ParentUnknown, Device: &a}, "the parent of 0000:17:00.0 is not known (its sysfs path names a bridge that was not read, or a loop)"},
		{UnknownFact{Kind: PortTypeUnread, Device: &a}, "the PCI Express port type of 0000:17:00.0 was not read (needs CAP_SYS_ADMIN)"},
		{UnknownFact{Kind: PortTypeUnread, Device: &a, Detail: "the first function of pci0000:17"}, "the first function of pci0000:17"},
		{UnknownFact{Kind: HostBridgeUnknown}, "host bridge not known"},
		{UnknownFact{Kind: TreeLoop}, "the tree has a loop"},
		{UnknownFact{Kind: NotInTopology}, "the provider or the client is not in the topology"},
	} {
		if got := tt.u.String(); got != tt.want {
			t.Errorf("%d: String() = %q, want %q", tt.u.Kind, got, tt.want)
		}
		b, err := json.Marshal(tt.u)
		if want, _ := json.Marshal(tt.want); err != nil || string(b) != string(want) {
			t.Errorf("%d: JSON %s (%v), want %s", tt.u.Kind, b, err, want)
		}
	}
}

// TestUnknownKindsDecide: what a verdict could not read is told by kind and
// function, whatever the sentence says.
func TestUnknownKindsDecide(t *testing.T) {
	s := plainSwitch.build(t)
	unread(s.dsp1)
	v := NewCalculator(s.t, intel).Calc(s.ep0, s.ep1)
	if len(v.Unknowns) != 1 || v.Unknowns[0].Kind != ACSUnread || v.Unknowns[0].Device == nil || *v.Unknowns[0].Device != s.dsp1.Address {
		t.Fatalf("unknowns = %+v, want ACS Control of %s unread", v.Unknowns, s.dsp1.Address)
	}
	if !v.HasUnknown(ACSUnread) || v.HasUnknown(PortTypeUnread) {
		t.Errorf("HasUnknown: ACS %t, port type %t; want true, false", v.HasUnknown(ACSUnread), v.HasUnknown(PortTypeUnread))
	}
}
