package promtext

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// family is one metric family built the same way in a Registry and in a
// client_golang registry.
type family struct {
	name, help string
	counter    bool
	labels     []string
	series     []point
}

type point struct {
	values []string
	v      float64
}

// build registers fams in a Registry and in a client_golang registry, with the
// constant labels extra on the latter (the former takes them at Write).
func build(fams []family, extra []Label) (*Registry, *prometheus.Registry) {
	ours, ref := new(Registry), prometheus.NewRegistry()
	constLabels := prometheus.Labels{}
	for _, l := range extra {
		constLabels[l.Name] = l.Value
	}
	for _, f := range fams {
		if f.counter {
			c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: f.name, Help: f.help, ConstLabels: constLabels}, f.labels)
			ref.MustRegister(c)
			o := ours.Counter(f.name, f.help, f.labels...)
			for _, p := range f.series {
				c.WithLabelValues(p.values...).Add(p.v)
				o.Add(p.v, p.values...)
			}
			continue
		}
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: f.name, Help: f.help, ConstLabels: constLabels}, f.labels)
		ref.MustRegister(g)
		o := ours.Gauge(f.name, f.help, f.labels...)
		for _, p := range f.series {
			g.WithLabelValues(p.values...).Set(p.v)
			o.Set(p.v, p.values...)
		}
	}
	return ours, ref
}

// reference is what client_golang's Gather and expfmt.MetricFamilyToText write
// for reg: the textfile an earlier p2pcheck wrote.
func reference(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

func write(t *testing.T, r *Registry, extra ...Label) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.Write(&b, extra...); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestWriteMatchesClientGolang: the bytes Write gives are those of
// client_golang and expfmt for the same families: order of families, series
// and labels, escapes, number forms, empty families left out.
func TestWriteMatchesClientGolang(t *testing.T) {
	fams := []family{
		{name: "p2pcheck_up", help: "1 when up.", series: []point{{nil, 1}}},
		{name: "p2pcheck_exit_code", help: "Exit code.", series: []point{{nil, 0}}},
		{name: "p2pcheck_empty", help: "No series: left out.", labels: []string{"x"}},
		{name: "p2pcheck_check_status", help: `Status (0 pass); subject "" is the check, a\b` + "\nsecond line.", labels: []string{"check", "subject"}, series: []point{
			{[]string{"pcie_link", ""}, 0},
			{[]string{"acs", "0000:17:00.0"}, 2},
			{[]string{"acs", ""}, 2},
			{[]string{"acs", `quote " back \ new` + "\nline"}, 1},
			{[]string{"acs", "ünïcödé ✓"}, 5},
		}},
		{name: "p2pcheck_values", help: "Number forms.", labels: []string{"v"}, series: []point{
			{[]string{"a"}, -1}, {[]string{"b"}, 0.25}, {[]string{"c"}, 1e-7}, {[]string{"d"}, 16777216},
			{[]string{"e"}, 1 << 53}, {[]string{"f"}, math.NaN()}, {[]string{"g"}, math.Inf(1)},
			{[]string{"h"}, math.Inf(-1)}, {[]string{"i"}, 137438953472}, {[]string{"j"}, 1.5}, {[]string{"k"}, 1796014800},
			{[]string{"l"}, 123456.789}, {[]string{"m"}, -0.0001}, {[]string{"n"}, 5e-324},
		}},
		{name: "p2pcheck_pcie_aer_errors_total", help: "AER.", counter: true, labels: []string{"severity", "bdf"}, series: []point{
			{[]string{"fatal", "0000:19:00.0"}, 0}, {[]string{"correctable", "0000:19:00.0"}, 37},
			{[]string{"correctable", "0000:19:00.0"}, 3}, {[]string{"nonfatal", "0000:01:00.0"}, 1},
		}},
		{name: "a:colon_name", help: "", series: []point{{nil, 2}}},
		{name: "p2pcheck_build_info", help: "Build; always 1.", labels: []string{"version", "driver", "cuda"}, series: []point{{[]string{"v1", "580.65", ""}, 1}}},
	}
	for _, extra := range [][]Label{nil, {{Name: "mode", Value: "quick"}}, {{Name: "aaa", Value: `x"y`}, {Name: "zzz", Value: ""}}} {
		ours, ref := build(fams, extra)
		got, want := write(t, ours, extra...), reference(t, ref)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("extra %v: Write differs from client_golang (-want +got):\n%s", extra, diff)
		}
	}
}

// TestWriteMatchesClientGolangRandom: the same comparison over random
// families, label values drawn from characters that need escaping, and random
// values.
func TestWriteMatchesClientGolangRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "Z", "0", " ", `"`, `\`, "\n", "é", "{", "}", ",", "=", "#"}
	str := func(n int) string {
		var b strings.Builder
		for range rng.IntN(n + 1) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	values := []float64{0, 1, -1, 2, 0.5, 1e21, 1e20, 1e-5, 1e-4, math.MaxFloat64, math.SmallestNonzeroFloat64, math.NaN(), math.Inf(1), math.Inf(-1)}
	for round := range 200 {
		var fams []family
		for i := range rng.IntN(6) {
			f := family{name: "m_" + string(rune('a'+i)), help: str(12), counter: rng.IntN(3) == 0}
			for j := range rng.IntN(4) {
				f.labels = append(f.labels, []string{"bdf", "alpha", "z", "mode_x"}[j])
			}
			for range rng.IntN(8) {
				p := point{v: values[rng.IntN(len(values))]}
				if rng.IntN(2) == 0 {
					p.v = rng.Float64() * math.Pow(10, float64(rng.IntN(40)-20))
				}
				if f.counter {
					// Whole counts, as the AER totals: client_golang keeps the
					// whole part of a counter apart from the fraction, so
					// fractional sums round differently.
					p.v = float64(rng.IntN(1 << 20))
				}
				for range f.labels {
					p.values = append(p.values, str(5))
				}
				f.series = append(f.series, p)
			}
			fams = append(fams, f)
		}
		extra := []Label{{Name: "mode", Value: str(3)}}
		ours, ref := build(fams, extra)
		if diff := cmp.Diff(reference(t, ref), write(t, ours, extra...)); diff != "" {
			t.Fatalf("round %d: Write differs from client_golang (-want +got):\n%s", round, diff)
		}
	}
}

// TestWriteInvalidUTF8: a label value that is not UTF-8 is written with
// U+FFFD in place of each bad byte (client_golang refuses the value by
// panicking), and expfmt reads the file.
func TestWriteInvalidUTF8(t *testing.T) {
	var r Registry
	r.Gauge("m", "h", "l").Set(1, "a\xffb")
	got := write(t, &r)
	want := "# HELP m h\n# TYPE m gauge\nm{l=\"a\uFFFDb\"} 1\n"
	if got != want {
		t.Errorf("Write = %q, want %q", got, want)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	if _, err := parser.TextToMetricFamilies(strings.NewReader(got)); err != nil {
		t.Errorf("expfmt: %v", err)
	}
}

func TestWriteInvalid(t *testing.T) {
	for _, tt := range []struct {
		name  string
		build func(r *Registry)
		extra []Label
	}{
		{"bad metric name", func(r *Registry) { r.Gauge("0abc", "h").Set(1) }, nil},
		{"empty metric name", func(r *Registry) { r.Gauge("", "h").Set(1) }, nil},
		{"dot in name", func(r *Registry) { r.Gauge("a.b", "h").Set(1) }, nil},
		{"bad label name", func(r *Registry) { r.Gauge("m", "h", "a-b").Set(1, "x") }, nil},
		{"reserved label name", func(r *Registry) { r.Gauge("m", "h", "__name__").Set(1, "x") }, nil},
		{"colon in label name", func(r *Registry) { r.Gauge("m", "h", "a:b").Set(1, "x") }, nil},
		{"label twice", func(r *Registry) { r.Gauge("m", "h", "a", "a").Set(1, "x", "y") }, nil},
		{"family twice", func(r *Registry) { r.Gauge("m", "h").Set(1); r.Counter("m", "h").Add(1) }, nil},
		{"too few values", func(r *Registry) { r.Gauge("m", "h", "a", "b").Set(1, "x") }, nil},
		{"too many values", func(r *Registry) { r.Gauge("m", "h").Set(1, "x") }, nil},
		{"counter decreased", func(r *Registry) { r.Counter("m_total", "h").Add(-1) }, nil},
		{"counter NaN", func(r *Registry) { r.Counter("m_total", "h").Add(math.NaN()) }, nil},
		{"extra label clashes", func(r *Registry) { r.Gauge("m", "h", "mode").Set(1, "x") }, []Label{{Name: "mode", Value: "quick"}}},
		{"bad extra label", func(r *Registry) { r.Gauge("m", "h").Set(1) }, []Label{{Name: "a b", Value: "quick"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var r Registry
			tt.build(&r)
			var b bytes.Buffer
			if err := r.Write(&b, tt.extra...); !errors.Is(err, ErrInvalid) {
				t.Errorf("Write error = %v, want ErrInvalid", err)
			}
			if b.Len() != 0 {
				t.Errorf("Write wrote %q before failing", b.String())
			}
		})
	}
}

// TestAddAccumulates: Add adds to a series, Set replaces it, and both reach
// the same series for the same label values.
func TestAddAccumulates(t *testing.T) {
	var r Registry
	g := r.Gauge("m", "h", "k")
	g.Add(1, "GPU")
	g.Add(1, "GPU")
	g.Add(1, "NVMe")
	g.Set(7, "x")
	g.Add(1, "x")
	want := "# HELP m h\n# TYPE m gauge\nm{k=\"GPU\"} 2\nm{k=\"NVMe\"} 1\nm{k=\"x\"} 8\n"
	if got := write(t, &r); got != want {
		t.Errorf("Write = %q, want %q", got, want)
	}
}
