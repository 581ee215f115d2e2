package provision

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/kversion"
	"github.com/p2pkit/p2pkit/pcie"
)

func mustVersion(t *testing.T, s string) kversion.Version {
	t.Helper()
	if s == "" {
		return kversion.Version{}
	}
	v, err := kversion.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestBootParamPerKernel: which parameter keeps a plan, per kernel release, from the
// kernel's history (drivers/pci/pci.c; docs/fix.md): pci=disable_acs_redir= from 4.19,
// the broken parser of commit 47c8846a49ba from 6.11, its fix 9cf8a952d57b in 6.15
// and the stable releases 6.12.23, 6.13.11 and 6.14.2.
func TestBootParamPerKernel(t *testing.T) {
	n := load(t, writeMachine(t, "dgx-h100"))
	rp := n.Topology.Device(pcie.Address{Bus: 0x17, Device: 2})   // 0000:15:01.0/0.0/2.0
	deep := n.Topology.Device(pcie.Address{Bus: 0x19, Device: 1}) // 0000:15:01.0/0.0/0.0/0.0/1.0
	clearRedir := []Setting{{Device: rp, Control: 0x001d, Planned: 0x0011}, {Device: deep, Control: 0x001d, Planned: 0x0011}}
	setDT := []Setting{{Device: rp, Control: 0x001d, Planned: 0x005d}}
	const (
		redir  = "pci=disable_acs_redir=0000:15:01.0/0.0/2.0;0000:15:01.0/0.0/0.0/0.0/1.0"
		config = "pci=config_acs=0010001@0000:15:01.0/0.0/2.0;0010001@0000:15:01.0/0.0/0.0/0.0/1.0"
	)
	for _, tc := range []struct {
		kernel string
		s      []Setting
		form   Form
		param  string
		boot   uint16 // ACS Control of the first function after a boot with param
	}{
		{"4.14.336", clearRedir, FormRuntimeOnly, "", 0},
		{"4.19", clearRedir, FormDisableACSRedir, redir, 0x0011},
		{"5.15.170", clearRedir, FormDisableACSRedir, redir, 0x0011},
		{"6.1.0-28-amd64", clearRedir, FormDisableACSRedir, redir, 0x0011},
		{"6.6.63", clearRedir, FormDisableACSRedir, redir, 0x0011},
		{"6.10.14", clearRedir, FormDisableACSRedir, redir, 0x0011},
		{"6.10.14", setDT, FormRuntimeOnly, "", 0},
		{"6.11", clearRedir, FormBrokenKernel, "", 0},
		{"6.11.11", clearRedir, FormBrokenKernel, "", 0},
		{"6.12.0", clearRedir, FormBrokenKernel, "", 0},
		{"6.12.22", clearRedir, FormBrokenKernel, "", 0},
		{"6.12.23", clearRedir, FormConfigACS, config, 0x0011},
		{"6.12.117-amd64", clearRedir, FormConfigACS, config, 0x0011},
		{"6.13.10", clearRedir, FormBrokenKernel, "", 0},
		{"6.13.11", clearRedir, FormConfigACS, config, 0x0011},
		{"6.14.1", clearRedir, FormBrokenKernel, "", 0},
		{"6.14.2", clearRedir, FormConfigACS, config, 0x0011},
		{"6.15", clearRedir, FormConfigACS, config, 0x0011},
		{"6.18.44-fc", setDT, FormConfigACS, "pci=config_acs=1011101@0000:15:01.0/0.0/2.0", 0x005d},
		{"", clearRedir, FormUnknownKernel, "", 0},
		{"6.12.23", nil, FormNone, "", 0},
	} {
		b := NewBootParam(mustVersion(t, tc.kernel), tc.s)
		if b.Form != tc.form || b.Param != tc.param || b.Usable() != (tc.param != "") {
			t.Errorf("%s: form %q param %q, want %q %q (%s)", tc.kernel, b.Form, b.Param, tc.form, tc.param, b.Reason)
		}
		if tc.form != FormNone && b.Reason == "" {
			t.Errorf("%s: no reason", tc.kernel)
		}
		if tc.param != "" && (len(b.Boot) == 0 || b.Boot[0].Planned != tc.boot) {
			t.Errorf("%s: boot values %+v, want %#04x first", tc.kernel, b.Boot, tc.boot)
		}
		if tc.form == FormBrokenKernel && !strings.Contains(b.Reason, "6.12.23") {
			t.Errorf("%s: reason names no fixed kernel: %s", tc.kernel, b.Reason)
		}
	}
}

// TestCommandLineLength: the DGX-like node's parameter fits a plain command line and
// not one already near COMMAND_LINE_SIZE.
func TestCommandLineLength(t *testing.T) {
	n := load(t, writeMachine(t, "dgx-h100"))
	plan := NewPlan(n.Topology, n.P2P(), PairsOfInterest(n.Interesting()), optionsOf(n))
	short := "BOOT_IMAGE=/boot/vmlinuz-6.8.0 root=/dev/sda1 ro"
	if l, ok := plan.Boot.Fits(short); !ok || l != len(short)+3+len(plan.Boot.Param) {
		t.Errorf("short command line: %d, fits %v", l, ok)
	}
	long := short + " " + strings.Repeat("x", CommandLineSize-len(plan.Boot.Param)-len(short))
	r := plan.NewReport(false, nil, nil, nil)
	r.CheckLength(long, plan.Boot)
	if r.Persistent.Fits || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "2047") {
		t.Errorf("long command line: fits %v, warnings %q", r.Persistent.Fits, r.Warnings)
	}
}

func TestMatchSpecs(t *testing.T) {
	n := load(t, writeMachine(t, "dgx-h100"))
	names := func(m map[*pcie.Device]string) map[string]string {
		out := map[string]string{}
		for d, f := range m {
			out[d.Address.String()] = f
		}
		return out
	}
	for _, tc := range []struct {
		list  string
		flags bool
		want  map[string]string
		bad   bool
	}{
		{"0000:15:01.0/0.0/2.0;17:02.0", false, map[string]string{"0000:17:02.0": ""}, false},
		{"0000:15:01.0/0.0/0.0/0.0/1.0", false, map[string]string{"0000:19:01.0": ""}, false},
		{"0010001@0000:15:01.0/0.0/2.0;1x1@0000:15:01.0", true,
			map[string]string{"0000:17:02.0": "0010001", "0000:15:01.0": "1x1"}, false},
		{"0000:15:01.0/9.0", false, map[string]string{}, false},
		{"0000:15:01.0;nonsense;0000:37:01.0", false, map[string]string{"0000:15:01.0": ""}, true},
		{"0010001", true, map[string]string{}, true},
		{"12@0000:15:01.0", true, map[string]string{}, true},
	} {
		got, bad := MatchSpecs(n.Topology, tc.list, tc.flags)
		if diff := cmp.Diff(tc.want, names(got)); diff != "" || bad != tc.bad {
			t.Errorf("%q: bad %v, matches (-want +got):\n%s", tc.list, bad, diff)
		}
	}
	// pci:<vendor>:<device> names every port of the model: the PEX downstream ports.
	got, _ := MatchSpecs(n.Topology, "pci:1000:c030", false)
	if len(got) < 26 {
		t.Errorf("pci:1000:c030 matched %d functions", len(got))
	}
	if m, v := FlagsMask("10x1"); m != 0x000d || v != 0x0009 {
		t.Errorf("FlagsMask(10x1) = %#x %#x", m, v)
	}
}

func FuzzMatchSpecs(f *testing.F) {
	top := pcie.NewTopology([]pcie.Record{
		{Address: pcie.Address{Device: 1}, Path: "pci0000:00/0000:00:01.0", Class: 0x060400},
		{Address: pcie.Address{Bus: 1}, Path: "pci0000:00/0000:00:01.0/0000:01:00.0", Class: 0x020000},
	})
	f.Add("0000:00:01.0/0.0;pci:8086:0", false)
	f.Add("0010001@0000:00:01.0", true)
	f.Fuzz(func(t *testing.T, list string, flags bool) {
		m, _ := MatchSpecs(top, list, flags)
		for d, fl := range m {
			if top.Device(d.Address) != d || (flags && !validFlags(fl)) {
				t.Fatalf("%q: bad match %v %q", list, d.Address, fl)
			}
		}
	})
}
