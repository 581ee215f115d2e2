package render

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Style decides how text output looks.
type Style struct {
	// Color enables ANSI colors (the caller decides: a terminal, no --no-color).
	Color bool
}

const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiDim    = "\x1b[2m"
)

func (s Style) paint(code, text string) string {
	if !s.Color || text == "" {
		return text
	}
	return code + text + ansiReset
}

func (s Style) bad(text string) string  { return s.paint(ansiRed, text) }
func (s Style) warn(text string) string { return s.paint(ansiYellow, text) }
func (s Style) good(text string) string { return s.paint(ansiGreen, text) }
func (s Style) dim(text string) string  { return s.paint(ansiDim, text) }
func (s Style) bold(text string) string { return s.paint(ansiBold, text) }

// Escape makes text read from sysfs, a snapshot, pci.ids or NVML safe to print on a
// terminal: C0 control bytes (ESC, BEL, CR, ...), DEL, C1 controls and bytes that
// are not UTF-8 are written as Go escapes (\x1b, \u009b), so a driver or interface
// name cannot move the cursor, set the window title or clear the screen; so are the
// runes that print nothing but change what the rest shows: bidirectional controls
// (U+202A-U+202E, U+2066-U+2069, which can reorder a line as Trojan Source does),
// zero-width characters (U+200B-U+200F, U+2060, U+FEFF), line and paragraph
// separators, and every other format, private-use, surrogate or unassigned rune.
// Tabs and newlines are escaped too: every value is printed on one line. Text
// without such runes is returned as is. Every text renderer passes names through it.
func Escape(text string) string {
	clean := true
	for _, r := range text {
		if needsEscape(r) {
			clean = false
			break
		}
	}
	if clean {
		return text
	}
	var b strings.Builder
	b.Grow(len(text) + 8)
	for i, w := 0, 0; i < len(text); i += w {
		r, size := utf8.DecodeRuneInString(text[i:])
		w = size
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, text[i])
		case needsEscape(r) && r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case needsEscape(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(text[i : i+size])
		}
	}
	return b.String()
}

// needsEscape reports the runes Escape rewrites: those that are not graphic
// (unicode.IsGraphic: letters, marks, numbers, punctuation, symbols and spaces),
// which leaves out controls (Cc: C0, DEL, C1), format characters (Cf: the bidi
// controls and zero-width characters), line and paragraph separators (Zl, Zp),
// private-use, surrogate and unassigned code points; and utf8.RuneError, which also
// stands for an invalid byte.
func needsEscape(r rune) bool { return !unicode.IsGraphic(r) || r == utf8.RuneError }

// EscapeLines is Escape for a text of several lines: each line is escaped and
// the line breaks are kept.
func EscapeLines(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = Escape(l)
	}
	return strings.Join(lines, "\n")
}
