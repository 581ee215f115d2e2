// Package readmecheck finds the command examples of a Markdown file, checks what
// they show against real output, and rewrites them from it.
//
// An example is a fenced code block whose first line is a shell prompt, "$ cmd".
// The block is a sequence of steps: each "$ " line is a command and the lines
// up to the next one its output. "$ echo $?" shows the previous command's exit
// status. One blank line before the next "$ " line separates steps and is not
// part of the output.
//
// A block may name the files it was copied from in an HTML comment on the line
// before its fence (blank lines between are allowed):
//
//	<!-- example: testdata/run.log testdata/other.txt -->
//
// The n-th command's output is then an excerpt of the n-th file (the last file
// serves the commands beyond): the shown lines appear in the file in order and
// contiguously, except that a line "..." stands for any number of elided lines.
// ANSI escape sequences in the file (a terminal's colors, underlines) are ignored.
package readmecheck

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// ErrSyntax is wrapped by every error about the Markdown file or a command in it.
var ErrSyntax = errors.New("readmecheck: syntax")

// Elision is the line that stands for elided lines in an excerpt.
const Elision = "..."

// Example is one fenced block that starts with a "$ " command line.
type Example struct {
	// Line is the 1-based line of the opening fence.
	Line int
	// Sources are the files the comment above the block names; nil if none.
	Sources []string
	// Steps are the commands in order, with the output shown after each.
	Steps []Step

	first, end int // 0-based lines of the block's content: [first, end)
}

// Step is one command and the output shown after it.
type Step struct {
	// Line is the 1-based line of the "$ " command.
	Line int
	// Command is the text after "$ ".
	Command string
	// Output is the lines shown after the command, without the blank line
	// that separates it from the next command.
	Output []string

	sep bool // a blank line separated Output from the next command
}

var (
	sourceComment = regexp.MustCompile(`^<!--\s*example:\s*(.*?)\s*-->$`)
	fence         = regexp.MustCompile("^(```+|~~~+)")
)

// Parse returns the examples of a Markdown file. Fenced blocks that do not
// start with "$ " are skipped; an unterminated fence or an example comment not
// followed by an example is an error.
func Parse(md []byte) ([]Example, error) {
	lines := splitLines(md)
	var exs []Example
	var sources []string // from the last example comment not yet used
	sourceLine := 0
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := sourceComment.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			if sources != nil {
				return nil, fmt.Errorf("%w: line %d: example comment not followed by an example", ErrSyntax, sourceLine)
			}
			sources = strings.Fields(m[1])
			if len(sources) == 0 {
				return nil, fmt.Errorf("%w: line %d: example comment names no file", ErrSyntax, i+1)
			}
			sourceLine = i + 1
			continue
		}
		f := fence.FindString(line)
		if f == "" {
			if sources != nil && strings.TrimSpace(line) != "" {
				return nil, fmt.Errorf("%w: line %d: example comment not followed by an example", ErrSyntax, sourceLine)
			}
			continue
		}
		end := i + 1
		for end < len(lines) && !strings.HasPrefix(lines[end], f) {
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("%w: line %d: unterminated code block", ErrSyntax, i+1)
		}
		if i+1 < end && strings.HasPrefix(lines[i+1], "$ ") {
			exs = append(exs, Example{Line: i + 1, Sources: sources, Steps: parseSteps(lines[i+1:end], i+2), first: i + 1, end: end})
		} else if sources != nil {
			return nil, fmt.Errorf("%w: line %d: example comment not followed by an example", ErrSyntax, sourceLine)
		}
		sources = nil
		i = end
	}
	if sources != nil {
		return nil, fmt.Errorf("%w: line %d: example comment not followed by an example", ErrSyntax, sourceLine)
	}
	return exs, nil
}

// parseSteps splits a block's lines, the first of which is a command, into steps;
// line is the 1-based line number of content[0].
func parseSteps(content []string, line int) []Step {
	var steps []Step
	for i, l := range content {
		if cmd, ok := strings.CutPrefix(l, "$ "); ok {
			if n := len(steps); n > 0 {
				out := steps[n-1].Output
				if k := len(out); k > 0 && out[k-1] == "" {
					steps[n-1].Output, steps[n-1].sep = out[:k-1], true
				}
			}
			steps = append(steps, Step{Line: line + i, Command: cmd})
			continue
		}
		steps[len(steps)-1].Output = append(steps[len(steps)-1].Output, l)
	}
	return steps
}

// Render returns md with the content of each example replaced by its Steps.
// exs must come from Parse(md), in order; only Output may have been changed.
func Render(md []byte, exs []Example) []byte {
	lines := splitLines(md)
	var b bytes.Buffer
	next := 0
	for _, ex := range exs {
		for _, l := range lines[next:ex.first] {
			b.WriteString(l + "\n")
		}
		for i, s := range ex.Steps {
			b.WriteString("$ " + s.Command + "\n")
			for _, l := range s.Output {
				b.WriteString(l + "\n")
			}
			if s.sep && i < len(ex.Steps)-1 {
				b.WriteString("\n")
			}
		}
		next = ex.end
	}
	for _, l := range lines[next:] {
		b.WriteString(l + "\n")
	}
	if len(md) > 0 && md[len(md)-1] != '\n' {
		b.Truncate(b.Len() - 1)
	}
	return b.Bytes()
}

// splitLines splits text into lines without their "\n"; a final "\n" does not
// start another line.
func splitLines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// Lines splits output into lines as Step.Output holds them: a final newline does
// not start another line.
func Lines(out string) []string { return splitLines([]byte(out)) }

// Command is a parsed example command line.
type Command struct {
	// Args is the program and its arguments, without a leading "sudo".
	Args []string
	// Sudo is set when the command ran under sudo.
	Sudo bool
	// Head is N of a trailing "| head -N" (or "| head -n N"); 0 if none.
	Head int
	// ExitStatus is set for "echo $?", which shows the previous exit status.
	ExitStatus bool
}

// ParseCommand parses the text after "$ ": words separated by spaces, single or
// double quotes without escapes, and at most one "| head -N". Any other shell
// syntax is an error.
func ParseCommand(s string) (Command, error) {
	words, err := shellWords(s)
	if err != nil {
		return Command{}, err
	}
	var c Command
	for i, w := range words {
		if w != "|" {
			continue
		}
		tail := words[i+1:]
		switch {
		case len(tail) == 2 && tail[0] == "head" && strings.HasPrefix(tail[1], "-"):
			c.Head, err = strconv.Atoi(tail[1][1:])
		case len(tail) == 3 && tail[0] == "head" && tail[1] == "-n":
			c.Head, err = strconv.Atoi(tail[2])
		default:
			return Command{}, fmt.Errorf("%w: %q: only \"| head -N\" may follow a pipe", ErrSyntax, s)
		}
		if err != nil || c.Head <= 0 {
			return Command{}, fmt.Errorf("%w: %q: bad line count for head", ErrSyntax, s)
		}
		words = words[:i]
		break
	}
	if len(words) > 0 && words[0] == "sudo" {
		c.Sudo, words = true, words[1:]
	}
	if len(words) == 0 {
		return Command{}, fmt.Errorf("%w: %q: no command", ErrSyntax, s)
	}
	c.Args = words
	c.ExitStatus = len(words) == 2 && words[0] == "echo" && words[1] == "$?"
	if c.ExitStatus && (c.Sudo || c.Head != 0) {
		return Command{}, fmt.Errorf("%w: %q: echo $? stands alone", ErrSyntax, s)
	}
	return c, nil
}

// shellWords splits s into words the way a shell does for the simple command
// lines of examples, refusing what it cannot do exactly.
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; ch {
		case ' ', '\t':
			if inWord {
				words, inWord = append(words, w.String()), false
				w.Reset()
			}
		case '\'', '"':
			j := strings.IndexByte(s[i+1:], ch)
			if j < 0 {
				return nil, fmt.Errorf("%w: %q: unterminated quote", ErrSyntax, s)
			}
			quoted := s[i+1 : i+1+j]
			if ch == '"' && strings.ContainsAny(quoted, "$`\\") {
				return nil, fmt.Errorf("%w: %q: expansion inside double quotes", ErrSyntax, s)
			}
			w.WriteString(quoted)
			inWord = true
			i += j + 1
		case ';', '&', '<', '>', '`', '(', ')', '\\', '*', '?', '[', '~', '#':
			if ch == '?' && w.String() == "$" {
				w.WriteByte(ch) // $?
				continue
			}
			return nil, fmt.Errorf("%w: %q: unsupported shell syntax %q", ErrSyntax, s, ch)
		default:
			if ch == '|' && inWord {
				return nil, fmt.Errorf("%w: %q: a pipe must stand apart", ErrSyntax, s)
			}
			w.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]`)

// StripANSI removes ANSI control sequences (CSI, e.g. colors) from a line.
func StripANSI(s string) string { return ansi.ReplaceAllString(s, "") }

// Excerpt checks that shown is an excerpt of src: its lines appear in src in
// order and contiguously, except that an Elision line stands for any number of
// src lines. It returns the index in src of the line after the excerpt's last
// line. The error names the first shown line that does not follow.
func Excerpt(shown, src []string) (int, error) {
	pos := 0
	for i := 0; i < len(shown); {
		if shown[i] == Elision {
			i++
			continue
		}
		j := i
		for j < len(shown) && shown[j] != Elision {
			j++
		}
		run := shown[i:j]
		at, best, bestAt := -1, -1, pos
		for k := pos; k+len(run) <= len(src); k++ {
			n := commonPrefix(run, src[k:])
			if n == len(run) {
				at = k
				break
			}
			if n > best {
				best, bestAt = n, k
			}
		}
		if at < 0 {
			if best < 0 {
				return 0, fmt.Errorf("shown line %d %q: past the end of the file (%d lines)", i+1, run[0], len(src))
			}
			got := "end of file"
			if bestAt+best < len(src) {
				got = strconv.Quote(src[bestAt+best])
			}
			return 0, fmt.Errorf("shown line %d %q: the file has %s there (its line %d)", i+best+1, run[best], got, bestAt+best+1)
		}
		pos = at + len(run)
		i = j
	}
	return pos, nil
}

func commonPrefix(a, b []string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

var rcLine = regexp.MustCompile(`(?:^|\s)rc=([0-9]{1,3})$`)

// ExitStatus returns the exit status that a log records after a command's
// output, as the first line at or after from that ends in "rc=N".
func ExitStatus(src []string, from int) (int, bool) {
	for _, l := range src[min(from, len(src)):] {
		if m := rcLine.FindStringSubmatch(l); m != nil {
			n, err := strconv.Atoi(m[1])
			return n, err == nil
		}
	}
	return 0, false
}
