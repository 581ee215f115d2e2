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
// name cannot move the cursor, set the window title or clear the screen. Tabs and
// newlines are escaped too: every value is printed on one line. Text without such
// bytes is returned as is. Every text renderer passes names through it.
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

// needsEscape reports the runes Escape rewrites: controls (unicode.IsControl: C0,
// DEL, C1) and utf8.RuneError, which also stands for an invalid byte.
func needsEscape(r rune) bool { return unicode.IsControl(r) || r == utf8.RuneError }

// EscapeLines is Escape for a text of several lines: each line is escaped and
// the line breaks are kept.
func EscapeLines(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = Escape(l)
	}
	return strings.Join(lines, "\n")
}
