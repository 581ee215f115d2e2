package render

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/p2pkit/p2pkit/p2pdma"
)

// Pair is one row of `p2pcheck pairs`: the kernel's verdict and the path class.
type Pair struct {
	p2pdma.Verdict
	// PathType is the nvidia-smi path class (PIX, PXB, PHB, NODE, SYS).
	PathType string
}

// PairsSchemaVersion is the version of schema/pairs.v1.json that PairsJSON
// writes in "schema_version".
// (a string, as in the report).
const PairsSchemaVersion = "1"

// PairsJSON streams {"pairs":[...]} in the contract of schema/pairs.v1.json,
// one object per pair as next yields them. It is written by hand rather than with
// encoding/json: `pairs --all` on a large node emits a million objects.
func PairsJSON(w io.Writer, pairs func(yield func(Pair) bool)) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	buf := make([]byte, 0, 512)
	reasons := reasonCache{}
	bw.WriteString(`{"schema_version":"` + PairsSchemaVersion + `","pairs":[`)
	first := true
	for p := range pairs {
		buf = buf[:0]
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = appendPair(buf, p, reasons)
		if _, err := bw.Write(buf); err != nil {
			return err
		}
	}
	bw.WriteString("\n]}\n")
	return bw.Flush()
}

// reasonCache holds reasons already encoded: a node has a few kinds of verdict and
// many pairs share each, so most reasons are escaped once instead of per pair.
type reasonCache map[string][]byte

// maxCachedReasons bounds the cache on trees where every reason differs.
const maxCachedReasons = 4096

func (c reasonCache) append(b []byte, reason string) []byte {
	if enc, ok := c[reason]; ok {
		return append(b, enc...)
	}
	start := len(b)
	b = appendJSONString(b, reason)
	if len(c) < maxCachedReasons {
		c[reason] = bytes.Clone(b[start:]) // b is reused for the next pair
	}
	return b
}

func appendPair(b []byte, p Pair, reasons reasonCache) []byte {
	b = append(b, "\n  {\"provider\":\""...)
	b = p.Provider.AppendText(b)
	b = append(b, `","client":"`...)
	b = p.Client.AppendText(b)
	b = append(b, `","map_type":"`...)
	b = append(b, p.MapType.String()...)
	b = append(b, `","distance":`...)
	b = strconv.AppendInt(b, int64(p.Distance), 10)
	b = append(b, `,"path_type":`...)
	b = appendJSONString(b, p.PathType)
	b = append(b, `,"acs_redirect":[`...)
	for i, a := range p.ACSRedirect {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = a.AppendText(b)
		b = append(b, '"')
	}
	b = append(b, `],"reason":`...)
	b = reasons.append(b, p.Reason)
	if p.Fix != nil {
		b = append(b, `,"fix":{"kernel_param":`...)
		b = appendJSONString(b, p.Fix.KernelParam())
		b = append(b, `,"setpci":[`...)
		for i, a := range p.Fix.Bridges {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, p2pdma.SetpciClear(a))
		}
		b = append(b, "]}"...)
	}
	if len(p.Unknowns) > 0 {
		b = append(b, `,"unknowns":[`...)
		for i, u := range p.Unknowns {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, u.String())
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced by U+FFFD as encoding/json does. Runs
// of bytes that need no escaping are copied whole.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
		}
		b = append(b, s[start:i]...)
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default: // invalid UTF-8
			b = append(b, `\ufffd`...)
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// PairsText writes one line per pair under a header: provider, client, map type,
// distance, path class and the bridges whose ACS redirect forces the host bridge.
func PairsText(w io.Writer, pairs func(yield func(Pair) bool), s Style) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	fmt.Fprintf(bw, "%-13s %-13s %-16s %4s %-4s  %s\n", "PROVIDER", "CLIENT", "MAP TYPE", "DIST", "PATH", "ACS REDIRECT / WHY")
	for p := range pairs {
		why := ""
		switch {
		case len(p.ACSRedirect) > 0:
			why = fmt.Sprint(p.ACSRedirect)
		case p.MapType != p2pdma.BusAddr:
			why = Escape(firstClause(p.Reason))
		}
		fmt.Fprintf(bw, "%-13s %-13s %s %4d %-4s  %s\n", p.Provider, p.Client, mapTypeCell(p.MapType, s), p.Distance, p.PathType, why)
	}
	return bw.Flush()
}

// firstClause shortens a verdict's reason for a table cell: the text before the
// first colon or semicolon ("p2pcheck pair" prints it whole).
func firstClause(reason string) string {
	if i := strings.IndexAny(reason, ":;"); i > 0 {
		return reason[:i]
	}
	return reason
}

// mapTypeCell pads before coloring so columns stay aligned.
func mapTypeCell(m p2pdma.MapType, s Style) string {
	return colorMapType(m, fmt.Sprintf("%-16s", m), s)
}

// mapTypeWord is the map type, colored.
func mapTypeWord(m p2pdma.MapType, s Style) string { return colorMapType(m, m.String(), s) }

func colorMapType(m p2pdma.MapType, cell string, s Style) string {
	switch m {
	case p2pdma.BusAddr:
		return s.good(cell)
	case p2pdma.ThruHostBridge:
		return s.warn(cell)
	}
	return s.bad(cell)
}
