// Package promtext writes and reads the Prometheus text exposition format
// (https://prometheus.io/docs/instrumenting/exposition_formats/), the format of
// the files node_exporter's textfile collector reads
// (prometheus/node_exporter, collector/textfile.go).
//
// It holds what p2pcheck's textfiles need, gauges and counters with labels,
// written as prometheus/common's expfmt.MetricFamilyToText writes them after a
// client_golang registry's Gather: families sorted by name, the series of a
// family sorted by their label values, labels by name, no timestamps. It
// replaces client_golang in the binary, whose package initialisation (protobuf
// descriptors, the Go and process collectors, net/http) cost every p2pcheck
// start about 9 ms; the tests compare every file it writes with what the
// reference parser reads.
package promtext

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Type is a metric type as a TYPE line names it.
type Type string

// The metric types p2pcheck writes, and untyped, which a file may hold.
const (
	Gauge   Type = "gauge"
	Counter Type = "counter"
	Untyped Type = "untyped"
)

// Label is one label of a series.
type Label struct{ Name, Value string }

// ErrInvalid is returned by [Registry.Write] for a family or series that cannot be
// written: a name outside the format's character set, two families of one name,
// the wrong number of label values, a counter that was decreased.
var ErrInvalid = errors.New("promtext: invalid metric")

// Registry holds metric families until they are written. The zero value is
// ready to use; it is not safe for concurrent use.
type Registry struct {
	families []*Family
	err      error // the first invalid registration or update
}

// Family is one metric family: a name, its help, type and label names, and a
// value per distinct combination of label values.
type Family struct {
	reg    *Registry
	name   string
	help   string
	typ    Type
	labels []string
	series map[string]*series // by the label values, joined by keySep
}

type series struct {
	values []string
	value  float64
}

// keySep joins label values into a map key: 0xff is never part of UTF-8.
const keySep = "\xff"

// Gauge registers a gauge family and returns it.
func (r *Registry) Gauge(name, help string, labels ...string) *Family {
	return r.register(name, help, Gauge, labels)
}

// Counter registers a counter family and returns it.
func (r *Registry) Counter(name, help string, labels ...string) *Family {
	return r.register(name, help, Counter, labels)
}

func (r *Registry) register(name, help string, typ Type, labels []string) *Family {
	f := &Family{reg: r, name: name, help: help, typ: typ, labels: slices.Clone(labels), series: map[string]*series{}}
	switch {
	case !ValidMetricName(name):
		r.fail(fmt.Errorf("%w: metric name %q", ErrInvalid, name))
	case slices.ContainsFunc(r.families, func(g *Family) bool { return g.name == name }):
		r.fail(fmt.Errorf("%w: %s registered twice", ErrInvalid, name))
	}
	for i, l := range labels {
		if !ValidLabelName(l) || slices.Contains(labels[:i], l) {
			r.fail(fmt.Errorf("%w: %s: label name %q", ErrInvalid, name, l))
		}
	}
	r.families = append(r.families, f)
	return f
}

func (r *Registry) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// Set sets the value of the series with these label values, one per label name
// in the order they were registered. Label values that are not valid UTF-8 have
// each bad byte replaced by U+FFFD, as the format requires UTF-8.
func (f *Family) Set(v float64, values ...string) {
	if s := f.get(values); s != nil {
		s.value = v
	}
}

// Add adds v to the value of the series with these label values (see Set); it
// starts at 0. A counter only grows: a negative v makes Write fail.
func (f *Family) Add(v float64, values ...string) {
	if f.typ == Counter && (v < 0 || math.IsNaN(v)) {
		f.reg.fail(fmt.Errorf("%w: %s: counter decreased by %v", ErrInvalid, f.name, v))
		return
	}
	if s := f.get(values); s != nil {
		s.value += v
	}
}

func (f *Family) get(values []string) *series {
	if len(values) != len(f.labels) {
		f.reg.fail(fmt.Errorf("%w: %s: %d label values for %d labels", ErrInvalid, f.name, len(values), len(f.labels)))
		return nil
	}
	key := strings.Join(values, keySep)
	s, ok := f.series[key]
	if !ok {
		s = &series{values: make([]string, len(values))}
		for i, v := range values {
			s.values[i] = strings.ToValidUTF8(v, string(utf8.RuneError))
		}
		f.series[key] = s
	}
	return s
}

// Write writes every family that has a series, each with its HELP and TYPE
// lines, in the order described in the package comment. extra labels every
// series (p2pcheck's mode label); a name of one that a family already has is an
// error. An invalid registry or label is found before anything is written.
func (r *Registry) Write(w io.Writer, extra ...Label) error {
	if r.err != nil {
		return r.err
	}
	for _, l := range extra {
		if !ValidLabelName(l.Name) {
			return fmt.Errorf("%w: label name %q", ErrInvalid, l.Name)
		}
	}
	fams := slices.Clone(r.families)
	slices.SortFunc(fams, func(a, b *Family) int { return strings.Compare(a.name, b.name) })
	labels := make([][]sortedLabel, len(fams))
	for i, f := range fams {
		var err error
		if labels[i], err = f.labelOrder(extra); err != nil {
			return err
		}
	}
	var b []byte
	for i, f := range fams {
		if len(f.series) == 0 {
			continue
		}
		b = appendFamily(b[:0], f, labels[i])
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// sortedLabel is one label of a family in the order written: its name, and where
// its value comes from, a series' values (index >= 0) or extra (value).
type sortedLabel struct {
	name  string
	index int
	value string
}

// labelOrder returns the family's labels and extra sorted by name.
func (f *Family) labelOrder(extra []Label) ([]sortedLabel, error) {
	labels := make([]sortedLabel, 0, len(f.labels)+len(extra))
	for i, n := range f.labels {
		labels = append(labels, sortedLabel{name: n, index: i})
	}
	for _, l := range extra {
		if slices.Contains(f.labels, l.Name) {
			return nil, fmt.Errorf("%w: %s already has label %q", ErrInvalid, f.name, l.Name)
		}
		labels = append(labels, sortedLabel{name: l.Name, index: -1, value: strings.ToValidUTF8(l.Value, string(utf8.RuneError))})
	}
	slices.SortFunc(labels, func(a, b sortedLabel) int { return strings.Compare(a.name, b.name) })
	return labels, nil
}

func (l sortedLabel) of(s *series) string {
	if l.index < 0 {
		return l.value
	}
	return s.values[l.index]
}

// appendFamily appends the HELP and TYPE lines and the series of f, sorted by
// their label values in label order (client_golang's internal.MetricSorter).
func appendFamily(b []byte, f *Family, labels []sortedLabel) []byte {
	b = append(b, "# HELP "...)
	b = append(b, f.name...)
	b = append(b, ' ')
	b = appendEscaped(b, f.help, false)
	b = append(b, "\n# TYPE "...)
	b = append(b, f.name...)
	b = append(b, ' ')
	b = append(b, f.typ...)
	b = append(b, '\n')
	all := make([]*series, 0, len(f.series))
	for _, s := range f.series {
		all = append(all, s)
	}
	slices.SortFunc(all, func(x, y *series) int {
		for _, l := range labels {
			if c := strings.Compare(l.of(x), l.of(y)); c != 0 {
				return c
			}
		}
		return 0
	})
	for _, s := range all {
		b = append(b, f.name...)
		if len(labels) > 0 {
			b = append(b, '{')
			for i, l := range labels {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, l.name...)
				b = append(b, `="`...)
				b = appendEscaped(b, l.of(s), true)
				b = append(b, '"')
			}
			b = append(b, '}')
		}
		b = append(b, ' ')
		b = AppendValue(b, s.value)
		b = append(b, '\n')
	}
	return b
}

// appendEscaped appends s with backslash and newline escaped, and the double
// quote too in a label value (quoted).
func appendEscaped(b []byte, s string, quoted bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quoted:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// AppendValue appends a sample value as the format writes it: NaN, +Inf, -Inf,
// else Go's shortest 'g' form (1, 0.25, 1.6777216e+07).
func AppendValue(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// ValidMetricName reports whether name is a metric name of the classic
// character set, [a-zA-Z_:][a-zA-Z0-9_:]*.
func ValidMetricName(name string) bool { return validName(name, true) }

// ValidLabelName reports whether name is a label name of the classic character
// set, [a-zA-Z_][a-zA-Z0-9_]*, and not one the format reserves ("__" prefix).
func ValidLabelName(name string) bool {
	return validName(name, false) && !strings.HasPrefix(name, "__")
}

func validName(name string, colon bool) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9' || colon && c == ':'
		if !ok {
			return false
		}
	}
	return true
}
