package promtext

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrSyntax is returned (wrapped, with the line number) by [Parse] for a file
// that is not in the text format.
var ErrSyntax = errors.New("promtext: syntax error")

// ReadFamily is a metric family as [Parse] read it.
type ReadFamily struct {
	Name string
	// Type is the type of its TYPE line: gauge, counter, untyped (also without a
	// TYPE line), summary or histogram.
	Type    Type
	Samples []Sample
}

// Sample is one sample line: the series' metric name (a summary's or
// histogram's carries a _sum, _count or _bucket suffix), its labels in the
// order of the line, and its value. A timestamp is read and dropped.
type Sample struct {
	Name   string
	Labels []Label
	Value  float64
}

// Label returns the value of the label name and whether the sample has it.
func (s Sample) Label(name string) (string, bool) {
	for _, l := range s.Labels {
		if l.Name == name {
			return l.Value, true
		}
	}
	return "", false
}

// Parse reads a file in the text format, metric and label names of the classic
// character set (what [Registry.Write] and client_golang write), into its
// families by name, those with samples only. As prometheus/common's expfmt.TextParser, it takes blank
// lines, comments, HELP and TYPE lines (at most one of each per family, TYPE
// before the family's samples), label sets with a trailing comma, the values
// NaN, +Inf and -Inf, and a timestamp; the samples of a summary or histogram
// belong to it by their suffix. Anything else is an error wrapping
// [ErrSyntax]: an invalid or reserved name, a label twice in one series, an
// escape other than \\, \" and \n, a value that is not a decimal float.
func Parse(b []byte) (map[string]*ReadFamily, error) {
	p := parser{fams: map[string]*ReadFamily{}}
	s := string(b)
	for n := 1; s != ""; n++ {
		line, rest, _ := strings.Cut(s, "\n")
		s = rest
		if err := p.line(line); err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrSyntax, n, err)
		}
	}
	for name, f := range p.fams {
		if len(f.Samples) == 0 {
			delete(p.fams, name)
		}
	}
	return p.fams, nil
}

type parser struct {
	fams   map[string]*ReadFamily
	typed  map[string]bool
	helped map[string]bool
}

func (p *parser) line(line string) error {
	line = strings.TrimLeft(line, " \t")
	switch {
	case line == "":
		return nil
	case line[0] == '#':
		return p.comment(strings.TrimLeft(line[1:], " \t"))
	}
	return p.sample(line)
}

// comment reads the text after '#': a HELP or TYPE line, or any other comment.
func (p *parser) comment(c string) error {
	keyword, rest := cutBlank(c)
	if keyword != "HELP" && keyword != "TYPE" {
		return nil
	}
	name, rest := cutBlank(rest)
	if !ValidMetricName(name) {
		return fmt.Errorf("invalid metric name %q in a %s line", name, keyword)
	}
	if keyword == "HELP" {
		if p.helped[name] {
			return fmt.Errorf("second HELP line for %s", name)
		}
		if p.helped == nil {
			p.helped = map[string]bool{}
		}
		p.helped[name] = true
		_, err := unescape(rest, false)
		p.family(name)
		return err
	}
	typ, extra := cutBlank(rest)
	switch Type(typ) {
	case Gauge, Counter, Untyped, "summary", "histogram":
	default:
		return fmt.Errorf("unknown metric type %q", typ)
	}
	if extra != "" {
		return fmt.Errorf("text after the type of %s", name)
	}
	f := p.family(name)
	if p.typed[name] || len(f.Samples) > 0 {
		return fmt.Errorf("second TYPE line for %s, or TYPE after its samples", name)
	}
	if p.typed == nil {
		p.typed = map[string]bool{}
	}
	p.typed[name] = true
	f.Type = Type(typ)
	return nil
}

// family returns the family name, created untyped on first use.
func (p *parser) family(name string) *ReadFamily {
	f, ok := p.fams[name]
	if !ok {
		f = &ReadFamily{Name: name, Type: Untyped}
		p.fams[name] = f
	}
	return f
}

// sample reads a sample line: name, optional labels, value, optional timestamp.
func (p *parser) sample(line string) error {
	i := 0
	for i < len(line) && line[i] != '{' && line[i] != ' ' && line[i] != '\t' {
		i++
	}
	name, rest := line[:i], strings.TrimLeft(line[i:], " \t")
	if !ValidMetricName(name) {
		return fmt.Errorf("invalid metric name %q", name)
	}
	s := Sample{Name: name}
	if strings.HasPrefix(rest, "{") {
		var err error
		if s.Labels, rest, err = labels(rest[1:]); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		rest = strings.TrimLeft(rest, " \t")
	}
	value, rest := cutBlank(rest)
	v, err := parseValue(value)
	if err != nil {
		return fmt.Errorf("%s: value %q: %w", name, value, err)
	}
	s.Value = v
	if rest != "" {
		ts, extra := cutBlank(rest)
		if _, err := strconv.ParseInt(ts, 10, 64); err != nil {
			return fmt.Errorf("%s: timestamp %q is not an integer", name, ts)
		}
		if extra != "" {
			return fmt.Errorf("%s: text after the timestamp", name)
		}
	}
	f := p.sampleFamily(name)
	f.Samples = append(f.Samples, s)
	return nil
}

// sampleFamily returns the family a sample called name belongs to: the one of
// that name, else the summary or histogram it is the _sum, _count (or
// _bucket) of, else a new untyped one.
func (p *parser) sampleFamily(name string) *ReadFamily {
	if f, ok := p.fams[name]; ok {
		return f
	}
	for _, suffix := range []string{"_sum", "_count", "_bucket"} {
		base, ok := strings.CutSuffix(name, suffix)
		if f := p.fams[base]; ok && f != nil && (f.Type == "histogram" || f.Type == "summary" && suffix != "_bucket") {
			return f
		}
	}
	return p.family(name)
}

// labels reads a label set after its '{' and returns it with the text after '}'.
func labels(s string) ([]Label, string, error) {
	var out []Label
	for {
		s = strings.TrimLeft(s, " \t")
		if strings.HasPrefix(s, "}") {
			return out, s[1:], nil
		}
		i := strings.IndexByte(s, '=')
		if i < 0 {
			return nil, "", errors.New("label set without '='")
		}
		name := strings.TrimRight(s[:i], " \t")
		if !validName(name, false) || name == "__name__" {
			return nil, "", fmt.Errorf("invalid label name %q", name)
		}
		for _, l := range out {
			if l.Name == name {
				return nil, "", fmt.Errorf("label %q twice", name)
			}
		}
		s = strings.TrimLeft(s[i+1:], " \t")
		if !strings.HasPrefix(s, `"`) {
			return nil, "", fmt.Errorf("label %s: value not quoted", name)
		}
		value, rest, err := quoted(s[1:])
		if err != nil {
			return nil, "", fmt.Errorf("label %s: %w", name, err)
		}
		out = append(out, Label{Name: name, Value: value})
		s = strings.TrimLeft(rest, " \t")
		switch {
		case strings.HasPrefix(s, ","):
			s = s[1:]
		case strings.HasPrefix(s, "}"):
		default:
			return nil, "", fmt.Errorf("label %s: want ',' or '}' after the value", name)
		}
	}
}

// quoted reads a label value after its opening quote, up to the closing one,
// and returns it unescaped with the text after the quote.
func quoted(s string) (value, rest string, err error) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			value, err := unescape(s[:i], true)
			return value, s[i+1:], err
		}
	}
	return "", "", errors.New("label value without its closing quote")
}

// unescape undoes the format's escapes: \\ and \n, and \" in a label value.
func unescape(s string, quoted bool) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		switch {
		case i == len(s):
			return "", errors.New("escape at the end")
		case s[i] == '\\':
			b.WriteByte('\\')
		case s[i] == 'n':
			b.WriteByte('\n')
		case s[i] == '"' && quoted:
			b.WriteByte('"')
		default:
			return "", fmt.Errorf("invalid escape sequence \\%c", s[i])
		}
	}
	return b.String(), nil
}

// parseValue parses a sample value: a decimal float, NaN or an infinity, as
// strconv.ParseFloat reads them, without hexadecimal floats or underscores
// (expfmt refuses those too).
func parseValue(s string) (float64, error) {
	if strings.ContainsAny(s, "pPxX_") {
		return 0, errors.New("not a decimal float")
	}
	return strconv.ParseFloat(s, 64)
}

// cutBlank returns the text before the first blank (space or tab) and the text
// after the run of blanks that follows it.
func cutBlank(s string) (before, after string) {
	i := strings.IndexAny(s, " \t")
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimLeft(s[i:], " \t")
}
