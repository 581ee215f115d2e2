package render

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/pcie"
)

// TestPreviousAERRoundTrip: what PrometheusRegistry writes, PreviousAER reads back.
func TestPreviousAERRoundTrip(t *testing.T) {
	a := pcie.Address{Domain: 0, Bus: 0x19, Device: 0, Function: 0}
	b := pcie.Address{Domain: 0x10000, Bus: 0xe1, Device: 0, Function: 0}
	rep := check.Report{ToolVersion: "test", Timestamp: time.Unix(0, 0), AER: []check.AERCount{
		{BDF: a, Correctable: 37, NonFatal: 1, Fatal: 0},
		{BDF: b, Correctable: 0, NonFatal: 0, Fatal: 2},
	}}
	var buf bytes.Buffer
	if err := PrometheusRegistry(rep, time.Second).Write(&buf, ModeLabel(ModeQuick)); err != nil {
		t.Fatal(err)
	}
	text := buf.Bytes()
	got, err := PreviousAER(bytes.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := map[pcie.Address]pcie.AERCounts{a: {Correctable: 37, NonFatal: 1}, b: {Fatal: 2}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PreviousAER (-want +got):\n%s", diff)
	}
	if !strings.Contains(string(text), "# TYPE p2pcheck_pcie_aer_errors_total counter\n") {
		t.Errorf("the AER totals are not the counter p2pcheck_pcie_aer_errors_total:\n%s", text)
	}
	// The gauge an older p2pcheck wrote is read back as well.
	old := "# TYPE p2pcheck_pcie_aer_errors gauge\np2pcheck_pcie_aer_errors{bdf=\"0000:19:00.0\",severity=\"correctable\"} 37\n"
	if got, err := PreviousAER(strings.NewReader(old)); err != nil || !cmp.Equal(got, map[pcie.Address]pcie.AERCounts{a: {Correctable: 37}}) {
		t.Errorf("PreviousAER(old gauge) = %v, %v", got, err)
	}
}

func TestPreviousAERRejects(t *testing.T) {
	for _, tt := range []struct{ name, in string }{
		{"bad bdf", `p2pcheck_pcie_aer_errors{bdf="zz",severity="fatal"} 1` + "\n"},
		{"bad bdf, counter", `p2pcheck_pcie_aer_errors_total{bdf="zz",severity="fatal"} 1` + "\n"},
		{"negative, counter", `p2pcheck_pcie_aer_errors_total{bdf="0000:01:00.0",severity="fatal",mode="full"} -1` + "\n"},
		{"bad severity", `p2pcheck_pcie_aer_errors{bdf="0000:01:00.0",severity="mild"} 1` + "\n"},
		{"negative", `p2pcheck_pcie_aer_errors{bdf="0000:01:00.0",severity="fatal"} -1` + "\n"},
		{"fraction", `p2pcheck_pcie_aer_errors{bdf="0000:01:00.0",severity="fatal"} 1.5` + "\n"},
		{"not text format", "{{{\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := PreviousAER(strings.NewReader(tt.in)); !errors.Is(err, ErrTextfile) {
				t.Errorf("PreviousAER(%q) error = %v, want ErrTextfile", tt.in, err)
			}
		})
	}
	got, err := PreviousAER(strings.NewReader("# other metrics only\np2pcheck_exit_code 0\n"))
	if err != nil || len(got) != 0 {
		t.Errorf("PreviousAER(no AER samples) = %v, %v; want empty, nil", got, err)
	}
}

func FuzzPreviousAER(f *testing.F) {
	f.Add(`p2pcheck_pcie_aer_errors{bdf="0000:01:00.0",severity="fatal"} 1` + "\n")
	f.Add("# HELP p2pcheck_pcie_aer_errors x\n# TYPE p2pcheck_pcie_aer_errors gauge\np2pcheck_pcie_aer_errors{bdf=\"0000:19:00.0\",severity=\"correctable\"} 37\n")
	f.Add("p2pcheck_exit_code 0\n")
	f.Add("# TYPE p2pcheck_pcie_aer_errors_total counter\np2pcheck_pcie_aer_errors_total{bdf=\"0000:19:00.0\",mode=\"quick\",severity=\"fatal\"} 2\n")
	f.Fuzz(func(t *testing.T, in string) {
		m, err := PreviousAER(strings.NewReader(in))
		if err != nil && m != nil {
			t.Errorf("PreviousAER returned both a map and %v", err)
		}
	})
}
