package procfs

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseNVIDIAParams(t *testing.T) {
	p := parseNVIDIAParams([]byte("EnableMSI: 1\nEnablePCIERelaxedOrderingMode: 0\nDmaRemapPeerMmio: 1\n" +
		"RegistryDwords: \"RMForceP2PType=1; ForceP2P=0x11;bad;Neg=-1\"\nRmMsg: \"\"\nno colon\n"))
	if got, ok := p.Uint("DmaRemapPeerMmio"); !ok || got != 1 {
		t.Errorf("DmaRemapPeerMmio = %d, %t", got, ok)
	}
	if _, ok := p.Uint("RmMsg"); ok {
		t.Errorf("an empty string reads as a number")
	}
	if v := p.Values["RmMsg"]; v != "" {
		t.Errorf("RmMsg = %q, want the quotes removed", v)
	}
	got := p.RegistryDwords()
	want := []RegistryDword{{Key: "RMForceP2PType", Value: 1, Raw: "1"}, {Key: "ForceP2P", Value: 0x11, Raw: "0x11"}, {Key: "bad"}, {Key: "Neg", Raw: "-1"}}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(RegistryDword{}, "Err")); diff != "" {
		t.Errorf("RegistryDwords (-want +got):\n%s", diff)
	}
	for i, d := range got {
		if (d.Err != nil) != (i >= 2) {
			t.Errorf("pair %d %q: err %v", i, d.Key, d.Err)
		}
	}
}

func FuzzNVIDIAParams(f *testing.F) {
	f.Add([]byte("RegistryDwords: \"A=1;B=0x2\"\nEnableResizableBar: 1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := parseNVIDIAParams(b)
		for _, d := range p.RegistryDwords() {
			if d.Err == nil && d.Key == "" && d.Raw == "" {
				t.Errorf("empty pair without error")
			}
		}
		p.Uint("EnableResizableBar")
	})
}
