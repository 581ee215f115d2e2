package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// manHeader is what every page's title line carries besides the command.
type manHeader struct {
	date    time.Time
	source  string // "p2pkit v0.4.0"
	manual  string // "p2pkit manual"
	section string // "1"
}

// writeManPage writes the man page of cmd in the man(7) macros: NAME with the
// short description (what whatis(1) and apropos(1) read), SYNOPSIS, the long
// description, the command's own options and those it inherits, the examples
// and the related pages. The help texts are plain text, so they are set as
// they are written: each line kept, blank lines starting paragraphs, indented
// lines (lists, commands) breaking where they stand.
func writeManPage(w io.Writer, cmd *cobra.Command, h manHeader) error {
	b := bufio.NewWriter(w)
	cmd.InitDefaultHelpFlag() // as --help lists it
	name := strings.ReplaceAll(cmd.CommandPath(), " ", "-")
	b.WriteString(".TH " + roffQuote(strings.ToUpper(name)) + " " + roffQuote(h.section) + " " +
		roffQuote(h.date.Format("Jan 2006")) + " " + roffQuote(h.source) + " " + roffQuote(h.manual) + "\n")
	b.WriteString(".nh\n.ad l\n")
	b.WriteString(".SH NAME\n" + roffText(name) + ` \- ` + roffText(cmd.Short) + "\n")
	b.WriteString(".SH SYNOPSIS\n\\fB" + roffText(cmd.CommandPath()) + "\\fR")
	if use, ok := strings.CutPrefix(cmd.UseLine(), cmd.CommandPath()); ok && strings.TrimSpace(use) != "" {
		b.WriteString(" " + roffText(strings.TrimSpace(use)))
	}
	b.WriteString("\n")
	if long := strings.TrimSpace(cmd.Long); long != "" {
		b.WriteString(".SH DESCRIPTION\n")
		writeRoffLines(b, long)
	}
	writeManFlags(b, "OPTIONS", cmd.NonInheritedFlags())
	writeManFlags(b, "OPTIONS INHERITED FROM PARENT COMMANDS", cmd.InheritedFlags())
	if ex := strings.TrimRight(cmd.Example, " \n"); ex != "" {
		b.WriteString(".SH EXAMPLES\n.nf\n")
		for _, l := range strings.Split(ex, "\n") {
			b.WriteString(roffLine(roffText(l)) + "\n")
		}
		b.WriteString(".fi\n")
	}
	var related []string
	if p := cmd.Parent(); p != nil {
		related = append(related, manPageName(p))
	}
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() && !c.IsAdditionalHelpTopicCommand() {
			related = append(related, manPageName(c))
		}
	}
	if len(related) > 0 {
		b.WriteString(".SH SEE ALSO\n")
		for i, r := range related {
			page, section, _ := strings.Cut(r, ".")
			sep := ",\n"
			if i == len(related)-1 {
				sep = "\n"
			}
			b.WriteString(".BR " + roffText(page) + " (" + section + ")" + sep)
		}
	}
	return b.Flush()
}

// writeManFlags writes the flags of fs that are not hidden, sorted by name as
// the help lists them, one tagged paragraph each: "-o, --output=FILE" and the
// usage with its default.
func writeManFlags(b *bufio.Writer, title string, fs *pflag.FlagSet) {
	first := true
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		if first {
			b.WriteString(".SH " + title + "\n")
			first = false
		}
		varname, usage := pflag.UnquoteUsage(f)
		tag := ""
		if f.Shorthand != "" && f.ShorthandDeprecated == "" {
			tag = `\fB\-` + roffText(f.Shorthand) + `\fR, `
		}
		tag += `\fB\-\-` + roffText(f.Name) + `\fR`
		if varname != "" {
			tag += `=\fI` + roffText(varname) + `\fR`
		}
		switch def := f.DefValue; {
		case def == "" || def == "false" || def == "0" || def == "[]" || def == "0s":
		case f.Value.Type() == "string":
			usage += " (default " + strconv.Quote(def) + ")" // as pflag's help
		default:
			usage += " (default " + def + ")"
		}
		b.WriteString(".TP\n" + roffLine(tag) + "\n")
		writeRoffLines(b, usage)
	})
}

// writeRoffLines writes plain text: its lines as they are, filled; a blank line
// as a new paragraph; a run of indented lines (a table, a list, commands)
// unfilled, as written.
func writeRoffLines(b *bufio.Writer, text string) {
	unfilled := false
	for _, l := range strings.Split(text, "\n") {
		indented := strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t")
		switch {
		case indented && !unfilled:
			b.WriteString(".nf\n")
		case !indented && unfilled:
			b.WriteString(".fi\n")
		}
		unfilled = indented
		if strings.TrimSpace(l) == "" {
			b.WriteString(".PP\n")
			continue
		}
		b.WriteString(roffLine(roffText(l)) + "\n")
	}
	if unfilled {
		b.WriteString(".fi\n")
	}
}

// roffText escapes text for roff (groff_char(7)): the backslash is the escape
// character, so it is written \e; a hyphen is written \-, the minus that
// option names and commands need to read as typed; a character outside ASCII
// is written by its code point, \[u2014], which troff reads whatever the
// page's encoding.
func roffText(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\e`)
		case r == '-':
			b.WriteString(`\-`)
		case r >= utf8.RuneSelf:
			fmt.Fprintf(&b, `\[u%04X]`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// roffLine makes a line of already escaped text safe to start a line: one that
// begins with '.' or '\” would be read as a request, so it gets the
// zero-width \& first.
func roffLine(s string) string {
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		return `\&` + s
	}
	return s
}

// roffQuote quotes a macro argument: a double quote inside is written as two.
func roffQuote(s string) string {
	return `"` + strings.ReplaceAll(roffText(s), `"`, `""`) + `"`
}
