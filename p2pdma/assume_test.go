package p2pdma

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/kversion"
	"github.com/p2pkit/p2pkit/pcie"
)

// verdictLines computes every ordered pair of type-0 functions of topo, self pairs
// included, in the oracle kernel's format and order.
func verdictLines(topo *pcie.Topology, plat Platform) []string {
	var fns []*pcie.Device
	for _, d := range topo.Devices {
		if d.Config != nil && d.Config.HeaderType == 0 {
			fns = append(fns, d)
		}
	}
	c := NewCalculator(topo, plat)
	var out []string
	for _, a := range fns {
		for _, b := range fns {
			v := c.Calc(a, b)
			out = append(out, fmt.Sprintf("%s %s %s %d", v.Provider, v.Client, v.MapType, v.Distance))
		}
	}
	return out
}

// TestAssumeAgainstKernel asks what-if questions of one QEMU guest and checks the
// answers against what the kernel printed on the same tree booted the other way:
// iommu-acs (the kernel set ACS redirect on the root ports) and iommu-acs-redir-off
// (pci=disable_acs_redir= cleared it again).
func TestAssumeAgainstKernel(t *testing.T) {
	const on, off = "../testdata/vm/iommu-acs-oracle", "../testdata/vm/iommu-acs-redir-off-oracle"
	for _, tc := range []struct {
		name     string
		from, to string
		assume   string
	}{
		{"off predicts disable_acs_redir", on, off, "acs-redirect=off"},
		{"on predicts intel_iommu=on", off, on, "acs-redirect=on"},
		{"off on a tree without redirect changes nothing", off, off, "acs-redirect=off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(tc.to, "oracle.txt"))
			if err != nil {
				t.Fatal(err)
			}
			want, _ := parseOracle(t, raw)
			topo, plat := loadSnapshot(t, filepath.Join(tc.from, "snapshot.tar.gz"))
			var a Assumptions
			if err := a.Set(tc.assume); err != nil {
				t.Fatal(err)
			}
			got := verdictLines(a.Topology(topo), a.Platform(plat))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s on %s differs from the kernel on %s (-kernel +assumed):\n%s", tc.assume, tc.from, tc.to, diff)
			}
		})
	}
}

// TestAssumeClearRedirect clears redirect on one root port only: the multifunction
// NVMe and e1000e below it become bus-addr, the switch pairs below the other root
// port (whose redirect is kept) do not change, and the tree read is untouched.
func TestAssumeClearRedirect(t *testing.T) {
	topo, plat := loadSnapshot(t, "../testdata/vm/iommu-acs-oracle/snapshot.tar.gz")
	rp := testsupport.Addr(t, "0000:00:03.0")
	a := Assumptions{ClearRedirect: []pcie.Address{rp}}
	after := a.Topology(topo)
	d := after.Device(rp)
	if acs, _ := d.ACS(); acs == nil || acs.Control != 0x0011 {
		t.Fatalf("ACS Control of %s after clearing: %+v, want 0x0011", rp, acs)
	}
	if acs, _ := topo.Device(rp).ACS(); acs.Control != 0x001d {
		t.Fatalf("the tree read changed: ACS Control %#x", acs.Control)
	}
	if acs, _ := after.Device(testsupport.Addr(t, "0000:00:02.0")).ACS(); acs.Control != 0x001d {
		t.Fatalf("the other root port changed: %#x", acs.Control)
	}
	calc := NewCalculator(after, plat)
	nvme, nic := after.Device(testsupport.Addr(t, "0000:05:00.0")), after.Device(testsupport.Addr(t, "0000:05:00.1"))
	if v := calc.Calc(nvme, nic); v.MapType != BusAddr || v.Distance != 2 {
		t.Errorf("NVMe -> e1000e below the cleared root port: %s %d, want bus-addr 2", v.MapType, v.Distance)
	}
}

func TestAssumptionsSet(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want Assumptions
		err  bool
	}{
		{in: []string{"acs-redirect=off"}, want: Assumptions{ACS: ACSRedirectOff}},
		{in: []string{"acs-redirect=on", "cpu=amd-zen"}, want: Assumptions{ACS: ACSRedirectOn, CPU: CPUAMDZen}},
		{in: []string{"cpu=amd-zen", "cpu=intel"}, want: Assumptions{CPU: CPUIntel}},
		{in: []string{"acs-redirect=maybe"}, err: true},
		{in: []string{"cpu"}, err: true},
		{in: []string{""}, err: true},
	} {
		var a Assumptions
		var err error
		for _, s := range tc.in {
			if err = a.Set(s); err != nil {
				break
			}
		}
		if tc.err {
			if !errors.Is(err, ErrBadAssumption) {
				t.Errorf("Set(%q): error %v, want ErrBadAssumption", tc.in, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Set(%q): %v", tc.in, err)
		}
		if diff := cmp.Diff(tc.want, a); diff != "" {
			t.Errorf("Set(%q) (-want +got):\n%s", tc.in, diff)
		}
		if got := a.Strings(); len(got) != len(tc.in) && tc.in[0] != "cpu=amd-zen" {
			t.Errorf("Strings() = %q", got)
		}
	}
}

func TestAssumeCPU(t *testing.T) {
	plat := Platform{CPUVendor: "GenuineIntel", CPUFamily: 6, Kernel: kversion.Version{Major: 6, Minor: 12}}
	if p := (Assumptions{CPU: CPUAMDZen}).Platform(plat); !p.cpuSupportsP2PDMA() || p.Kernel != plat.Kernel {
		t.Errorf("cpu=amd-zen: %+v", p)
	}
	amd := Platform{CPUVendor: "AuthenticAMD", CPUFamily: 0x19}
	if p := (Assumptions{CPU: CPUIntel}).Platform(amd); p.cpuSupportsP2PDMA() {
		t.Errorf("cpu=intel: %+v", p)
	}
	if p := (Assumptions{}).Platform(amd); p != amd {
		t.Errorf("no assumption changed the platform: %+v", p)
	}
}

// FuzzAssumptionsSet: Set accepts exactly the four forms, and what it accepts
// round-trips through Strings.
func FuzzAssumptionsSet(f *testing.F) {
	for _, s := range []string{"acs-redirect=off", "acs-redirect=on", "cpu=amd-zen", "cpu=intel", "cpu=", "=", "acs-redirect=off=on"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var a Assumptions
		if err := a.Set(s); err != nil {
			if !errors.Is(err, ErrBadAssumption) || !a.IsZero() {
				t.Fatalf("Set(%q): %v, %+v", s, err, a)
			}
			return
		}
		if got := a.Strings(); len(got) != 1 || got[0] != s {
			t.Fatalf("Set(%q) then Strings() = %q", s, got)
		}
	})
}
