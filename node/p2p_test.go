package node

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/p2pkit/p2pkit/kversion"
	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/procfs"
)

func TestP2P(t *testing.T) {
	amd := &procfs.CPUInfo{VendorID: "AuthenticAMD", Family: 25}
	k := &kversion.Version{Release: "6.12.3-x", Major: 6, Minor: 12, Patch: 3}
	tests := []struct {
		name string
		n    Node
		want p2pdma.Platform
	}{
		{"nothing read", Node{}, p2pdma.Platform{}},
		{"cpu and kernel", Node{Platform: Platform{CPU: amd, Kernel: k}},
			p2pdma.Platform{CPUVendor: "AuthenticAMD", CPUFamily: 25, Kernel: kversion.Version{Major: 6, Minor: 12}}},
		{"override", Node{Platform: Platform{CPU: amd, Kernel: k}, kernel: kversion.Version{Major: 6, Minor: 1}},
			p2pdma.Platform{CPUVendor: "AuthenticAMD", CPUFamily: 25, Kernel: kversion.Version{Major: 6, Minor: 1}}},
		{"override without /proc/version", Node{kernel: kversion.Version{Major: 7, Minor: 2}},
			p2pdma.Platform{Kernel: kversion.Version{Major: 7, Minor: 2}}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, tt.n.P2P()); diff != "" {
			t.Errorf("%s: P2P() (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestLoadKernelOverride checks that Options.Kernel reaches P2P as a release series,
// and not when the platform facts are skipped.
func TestLoadKernelOverride(t *testing.T) {
	for _, tt := range []struct {
		opt  Options
		want kversion.Version
	}{
		{Options{Kernel: "6.1.90-x", NoNames: true}, kversion.Version{Major: 6, Minor: 1}},
		{Options{Kernel: "6.1", NoNames: true, NoPlatform: true}, kversion.Version{}},
	} {
		n, err := LoadSnapshot("../testdata/h200-2gpu-vm/snapshot.tar.gz", tt.opt)
		if err != nil {
			t.Fatal(err)
		}
		if got := n.P2P().Kernel; got != tt.want {
			t.Errorf("%+v: P2P().Kernel = %#v, want %#v", tt.opt, got, tt.want)
		}
	}
	if _, err := LoadSnapshot("../testdata/h200-2gpu-vm/snapshot.tar.gz", Options{Kernel: "6"}); err == nil {
		t.Error("Options.Kernel 6 accepted")
	}
}
