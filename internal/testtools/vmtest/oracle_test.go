package vmtest

import (
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/pcie"
)

const oracleSample = `[    0.9] pci 0000:00:02.0: PCI bridge
[    1.1] pci-p2pdma: p2poracle: begin cpu_supports_p2pdma=0
[    1.1] pci-p2pdma: p2poracle: 0000:03:00.0 0000:03:00.0 bus-addr 0
[    1.1] pci-p2pdma: p2poracle: 0000:03:00.0 0000:04:00.0 bus-addr 4
[    1.1] pci-p2pdma: p2poracle: 0000:04:00.0 0000:00:1f.2 not-supported 5
[    1.2] pci-p2pdma: p2poracle: end
[    1.3] other: line
`

func TestParseOracle(t *testing.T) {
	o, err := ParseOracle([]byte(oracleSample))
	if err != nil {
		t.Fatal(err)
	}
	want := []Verdict{
		{testsupport.Addr(t, "0000:03:00.0"), testsupport.Addr(t, "0000:03:00.0"), "bus-addr", 0},
		{testsupport.Addr(t, "0000:03:00.0"), testsupport.Addr(t, "0000:04:00.0"), "bus-addr", 4},
		{testsupport.Addr(t, "0000:04:00.0"), testsupport.Addr(t, "0000:00:1f.2"), "not-supported", 5},
	}
	if o.CPUSupportsP2PDMA || len(o.Verdicts) != len(want) {
		t.Fatalf("got %+v", o)
	}
	for i := range want {
		if o.Verdicts[i] != want[i] {
			t.Errorf("verdict %d = %v, want %v", i, o.Verdicts[i], want[i])
		}
	}
	// Lines is the stable form: parsing it again gives the same report.
	again, err := ParseOracle(o.Lines())
	if err != nil {
		t.Fatal(err)
	}
	if string(again.Lines()) != string(o.Lines()) || strings.Count(string(o.Lines()), "\n") != 5 {
		t.Errorf("Lines does not round-trip:\n%s", o.Lines())
	}
}

func TestParseOracleErrors(t *testing.T) {
	const b, e = oracleTag + "begin cpu_supports_p2pdma=1\n", oracleTag + "end\n"
	tests := []struct{ name, in, want string }{
		{"no report", "nothing here\n", "incomplete"},
		{"no end", b, "incomplete"},
		{"end first", e + b, "out of place"},
		{"bad begin", oracleTag + "begin cpu_supports_p2pdma=2\n" + e, "bad begin"},
		{"two begins", b + b + e, "bad begin"},
		{"verdict outside", oracleTag + "0000:00:00.0 0000:00:00.0 bus-addr 0\n" + b + e, "outside"},
		{"bad map type", b + oracleTag + "0000:00:00.0 0000:00:00.0 maybe 0\n" + e, "bad verdict"},
		{"bad address", b + oracleTag + "00:00.0 0000:00:00.0 bus-addr 0\n" + e, "bad verdict"},
		{"bad distance", b + oracleTag + "0000:00:00.0 0000:00:00.0 bus-addr x\n" + e, "bad verdict"},
		{"duplicate", b + strings.Repeat(oracleTag+"0000:00:00.0 0000:00:00.0 bus-addr 0\n", 2) + e, "twice"},
		{"garbage", b + oracleTag + "what\n" + e, "unrecognised"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseOracle([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestOracleWithVFs(t *testing.T) {
	pf, peer, vf1, vf2 := testsupport.Addr(t, "0000:03:00.0"), testsupport.Addr(t, "0000:04:00.0"), testsupport.Addr(t, "0000:03:00.1"), testsupport.Addr(t, "0000:03:00.2")
	o := Oracle{Verdicts: []Verdict{
		{pf, pf, "bus-addr", 0},
		{pf, peer, "bus-addr", 4},
		{peer, pf, "bus-addr", 4},
		{peer, peer, "bus-addr", 0},
	}}
	got := o.WithVFs(map[pcie.Address]pcie.Address{vf1: pf, vf2: pf})
	want := []Verdict{
		{pf, pf, "bus-addr", 0},
		{pf, peer, "bus-addr", 4},
		{vf1, peer, "bus-addr", 4},
		{vf2, peer, "bus-addr", 4},
		{peer, pf, "bus-addr", 4},
		{peer, vf1, "bus-addr", 4},
		{peer, vf2, "bus-addr", 4},
		{peer, peer, "bus-addr", 0},
	}
	if len(got.Verdicts) != len(want) {
		t.Fatalf("got %v, want %v", got.Verdicts, want)
	}
	for i := range want {
		if got.Verdicts[i] != want[i] {
			t.Errorf("verdict %d = %v, want %v", i, got.Verdicts[i], want[i])
		}
	}
	if len(o.Verdicts) != 4 {
		t.Errorf("WithVFs changed its receiver: %v", o.Verdicts)
	}
}

// TestParseOracleRerun takes the last rerun report from a dmesg that also holds the
// boot report and an earlier rerun.
func TestParseOracleRerun(t *testing.T) {
	const tag = "[  9.1] " + oracleTag
	dmesg := tag + "begin cpu_supports_p2pdma=0\n" +
		tag + "0000:01:00.0 0000:01:00.1 not-supported 2\n" + tag + "end\n" +
		tag + "begin rerun=1 cpu_supports_p2pdma=0\n" +
		tag + "0000:01:00.0 0000:01:00.1 not-supported 2\n" + tag + "end\n" +
		"[ 12.0] something else\n" +
		tag + "begin rerun=2 cpu_supports_p2pdma=1\n" +
		tag + "0000:01:00.0 0000:01:00.1 bus-addr 2\n" + tag + "end\n" +
		"[ 13.0] after\n"
	o, err := ParseOracleRerun([]byte(dmesg))
	if err != nil {
		t.Fatal(err)
	}
	if !o.CPUSupportsP2PDMA || len(o.Verdicts) != 1 || o.Verdicts[0].MapType != "bus-addr" {
		t.Errorf("got %+v", o)
	}
	for _, bad := range []string{
		tag + "begin cpu_supports_p2pdma=0\n" + tag + "end\n", // no rerun
		tag + "begin rerun=1\n" + tag + "end\n",               // no CPU field
		tag + "begin rerun=1 cpu_supports_p2pdma=0\n",         // no end
	} {
		if _, err := ParseOracleRerun([]byte(bad)); err == nil {
			t.Errorf("ParseOracleRerun(%q): no error", bad)
		}
	}
}

// FuzzParseOracleRerun: arbitrary console bytes never panic, and an accepted report
// round-trips through Lines.
func FuzzParseOracleRerun(f *testing.F) {
	f.Add([]byte(oracleTag + "begin rerun=1 cpu_supports_p2pdma=0\n" + oracleTag + "0000:01:00.0 0000:01:00.1 bus-addr 2\n" + oracleTag + "end\n"))
	f.Add([]byte(oracleTag + "begin rerun=\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := ParseOracleRerun(b)
		if err != nil {
			return
		}
		again, err := ParseOracle(o.Lines())
		if err != nil || string(again.Lines()) != string(o.Lines()) {
			t.Fatalf("accepted report does not round-trip: %v", err)
		}
	})
}
