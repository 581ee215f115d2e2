package promtext

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// flat is a file's gauge, counter and untyped samples in one comparable form:
// "family type name{labels sorted} value".
func flat(fams map[string]*ReadFamily) []string {
	var out []string
	for _, f := range fams {
		if f.Type != Gauge && f.Type != Counter && f.Type != Untyped {
			continue
		}
		for _, s := range f.Samples {
			out = append(out, line(f.Name, string(f.Type), s.Name, s.Labels, s.Value))
		}
	}
	slices.Sort(out)
	return out
}

// flatReference is flat of what expfmt read.
func flatReference(fams map[string]*dto.MetricFamily) []string {
	var out []string
	for _, f := range fams {
		var typ string
		switch f.GetType() {
		case dto.MetricType_GAUGE:
			typ = string(Gauge)
		case dto.MetricType_COUNTER:
			typ = string(Counter)
		case dto.MetricType_UNTYPED:
			typ = string(Untyped)
		default:
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []Label
			for _, l := range m.GetLabel() {
				labels = append(labels, Label{Name: l.GetName(), Value: l.GetValue()})
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue()
			out = append(out, line(f.GetName(), typ, f.GetName(), labels, v))
		}
	}
	slices.Sort(out)
	return out
}

func line(family, typ, name string, labels []Label, v float64) string {
	labels = slices.Clone(labels)
	slices.SortFunc(labels, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
	return fmt.Sprintf("%s %s %s%q %s", family, typ, name, labels, AppendValue(nil, v))
}

// parseReference parses b with prometheus/common's parser.
func parseReference(b []byte) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(strings.NewReader(string(b)))
}

// TestParseRoundTrip: Parse reads back what Write writes, as expfmt does.
func TestParseRoundTrip(t *testing.T) {
	var ok Registry
	ok.Gauge("p2pcheck_check_status", "Status; \"quoted\" \\ and\nnewline.", "check", "subject").Set(2, "acs", `a "b" \c`+"\nd")
	values := ok.Gauge("p2pcheck_values", "v", "v")
	values.Set(math.NaN(), "nan")
	values.Set(-0.25, "quarter")
	ok.Counter("p2pcheck_pcie_aer_errors_total", "AER.", "bdf", "severity").Add(37, "0000:19:00.0", "correctable")
	ok.Gauge("p2pcheck_up", "up").Set(1)
	b := []byte(write(t, &ok, Label{Name: "mode", Value: "quick"}))
	got, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, b)
	}
	ref, err := parseReference(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(flatReference(ref), flat(got)); diff != "" {
		t.Errorf("Parse differs from expfmt (-want +got):\n%s", diff)
	}
	want := []string{
		`p2pcheck_check_status gauge p2pcheck_check_status[{"check" "acs"} {"mode" "quick"} {"subject" "a \"b\" \\c\nd"}] 2`,
		`p2pcheck_pcie_aer_errors_total counter p2pcheck_pcie_aer_errors_total[{"bdf" "0000:19:00.0"} {"mode" "quick"} {"severity" "correctable"}] 37`,
		`p2pcheck_up gauge p2pcheck_up[{"mode" "quick"}] 1`,
		`p2pcheck_values gauge p2pcheck_values[{"mode" "quick"} {"v" "nan"}] NaN`,
		`p2pcheck_values gauge p2pcheck_values[{"mode" "quick"} {"v" "quarter"}] -0.25`,
	}
	if diff := cmp.Diff(want, flat(got)); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
}

// TestParseReferenceFile: a textfile client_golang wrote on the H200 machine
// reads as expfmt reads it.
func TestParseReferenceFile(t *testing.T) {
	b, err := os.ReadFile("../testdata/h200-2gpu-live/p2pcheck.prom")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := parseReference(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(flatReference(ref), flat(got)); diff != "" {
		t.Errorf("Parse differs from expfmt (-want +got):\n%s", diff)
	}
	if len(flat(got)) < 10 {
		t.Errorf("only %d samples read", len(flat(got)))
	}
}

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		want     []string
	}{
		{"blank lines and comments", "\n  \n# a comment\n#\tHELP m the help\nm 1\n", []string{"m untyped m[] 1"}},
		{"timestamp", "m{a=\"b\"} 2 1700000000000\n", []string{`m untyped m[{"a" "b"}] 2`}},
		{"trailing comma, blanks", "m { a = \"b\" , } \t3\n", []string{`m untyped m[{"a" "b"}] 3`}},
		{"empty label set", "m{} 4\n", []string{"m untyped m[] 4"}},
		{"infinities", "m{a=\"1\"} +Inf\nm{a=\"2\"} -Inf\nm{a=\"3\"} NaN\n", []string{`m untyped m[{"a" "1"}] +Inf`, `m untyped m[{"a" "2"}] -Inf`, `m untyped m[{"a" "3"}] NaN`}},
		{"exponent", "m 1.5e+07\n", []string{"m untyped m[] 1.5e+07"}},
		{"typed", "# TYPE m counter\nm 5\n", []string{"m counter m[] 5"}},
		{"families interleaved", "a 1\nb 2\na{x=\"y\"} 3\n", []string{"a untyped a[] 1", `a untyped a[{"x" "y"}] 3`, "b untyped b[] 2"}},
		{"summary samples belong to it", "# TYPE s summary\ns{quantile=\"0.5\"} 1\ns_sum 2\ns_count 3\ng 4\n", []string{"g untyped g[] 4"}},
		{"family without samples dropped", "# TYPE e gauge\n# HELP e h\n", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, flat(got)); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
			if _, ok := got["e"]; ok {
				t.Error("family e without samples kept")
			}
			if ref, err := parseReference([]byte(tt.in)); err != nil {
				t.Errorf("expfmt refuses it: %v", err)
			} else if diff := cmp.Diff(flatReference(ref), flat(got)); diff != "" {
				t.Errorf("Parse differs from expfmt (-want +got):\n%s", diff)
			}
		})
	}
	if fams, _ := Parse([]byte("# TYPE s summary\ns_sum 2\n")); len(fams["s"].Samples) != 1 || fams["s"].Samples[0].Name != "s_sum" {
		t.Errorf("summary sample: %+v", fams["s"])
	}
}

func TestParseRejects(t *testing.T) {
	for _, in := range []string{
		"0m 1\n",
		"m\n",
		"m one\n",
		"m 0x1p3\n",
		"m 1_000\n",
		"m 1 2 3\n",
		"m 1 1.5\n",
		"m{a=\"b\" 1\n",
		"m{a=b} 1\n",
		"m{a=\"b\"c=\"d\"} 1\n",
		"m{a=\"b\",a=\"c\"} 1\n",
		"m{__name__=\"x\"} 1\n",
		"m{a-b=\"x\"} 1\n",
		"m{a=\"\\t\"} 1\n",
		"m{a=\"x\\\"} 1\n",
		"m{a} 1\n",
		"# TYPE m gauge\n# TYPE m gauge\nm 1\n",
		"m 1\n# TYPE m gauge\n",
		"# HELP m a\n# HELP m b\n",
		"# TYPE m thing\n",
		"# TYPE m gauge extra\n",
		"# TYPE 0m gauge\n",
		"# HELP m bad \\t escape\n",
		"{\"m\"} 1\n",
	} {
		if _, err := Parse([]byte(in)); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) error = %v, want ErrSyntax", in, err)
		}
	}
}

// FuzzParse compares Parse with expfmt's parser: wherever both take a file,
// they read the same gauge, counter and untyped samples. Parse never panics,
// and it reads back what Write wrote.
func FuzzParse(f *testing.F) {
	f.Add("# HELP p2pcheck_up up\n# TYPE p2pcheck_up gauge\np2pcheck_up{mode=\"quick\"} 1\n")
	f.Add("p2pcheck_pcie_aer_errors_total{bdf=\"0000:19:00.0\",severity=\"fatal\"} 2 1700000000\n")
	f.Add("m{a=\"\\\"\\\\\\n\",} -Inf\n# comment\n\nn NaN\n")
	f.Add("# TYPE s summary\ns{quantile=\"0.5\"} 1\ns_sum 2\ns_count 3\n")
	f.Add("# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum 2\nh_count 1\n")
	f.Fuzz(func(t *testing.T, in string) {
		got, err := Parse([]byte(in))
		ref, refErr := parseReference([]byte(in))
		if err != nil || refErr != nil {
			return
		}
		if diff := cmp.Diff(flatReference(ref), flat(got)); diff != "" {
			t.Errorf("Parse(%q) differs from expfmt (-want +got):\n%s", in, diff)
		}
	})
}
