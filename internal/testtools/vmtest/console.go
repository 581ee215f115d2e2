package vmtest

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// Console markers. The guest's /init prints every capture between a begin and an end
// line on the serial console:
//
//	==P2PKIT-BEGIN <name> <text|base64>==
//	...
//	==P2PKIT-END <name> <exit status>==
//
// and ==P2PKIT-DONE== once all captures are out, so that a guest that died half way
// is told apart from one that had nothing to say.
const (
	markBegin = "==P2PKIT-BEGIN "
	markEnd   = "==P2PKIT-END "
	markDone  = "==P2PKIT-DONE=="
)

// Section is one capture the guest printed between markers.
type Section struct {
	Name string
	Data []byte // decoded: base64 sections are returned as the original bytes
	// Status is the exit status of the guest command that produced the capture.
	Status int
}

// Console is what the guest printed, split into its captures.
type Console struct {
	Sections map[string]Section
	Done     bool // the guest printed the final marker
}

// ParseConsole splits serial-console output into captures. Carriage returns that the
// tty adds are dropped; lines outside markers (kernel messages, shell noise) are
// ignored. A section that is never closed, or whose base64 does not decode, is an
// error: a truncated capture must not pass for a short one.
func ParseConsole(out []byte) (Console, error) {
	c := Console{Sections: map[string]Section{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	var (
		open   string
		enc    string
		body   bytes.Buffer
		inside bool
	)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case strings.HasPrefix(line, markBegin) && strings.HasSuffix(line, "=="):
			if inside {
				return c, fmt.Errorf("vmtest: console: section %q not closed before %q", open, line)
			}
			f := strings.Fields(strings.TrimSuffix(strings.TrimPrefix(line, markBegin), "=="))
			if len(f) != 2 || (f[1] != "text" && f[1] != "base64") {
				return c, fmt.Errorf("vmtest: console: bad begin marker %q", line)
			}
			open, enc, inside = f[0], f[1], true
			body.Reset()
		case strings.HasPrefix(line, markEnd) && strings.HasSuffix(line, "=="):
			f := strings.Fields(strings.TrimSuffix(strings.TrimPrefix(line, markEnd), "=="))
			if !inside || len(f) != 2 || f[0] != open {
				return c, fmt.Errorf("vmtest: console: end marker %q does not close %q", line, open)
			}
			status, err := strconv.Atoi(f[1])
			if err != nil {
				return c, fmt.Errorf("vmtest: console: bad exit status in %q", line)
			}
			data := bytes.Clone(body.Bytes())
			if enc == "base64" {
				data, err = base64.StdEncoding.DecodeString(string(bytes.Join(bytes.Fields(data), nil)))
				if err != nil {
					return c, fmt.Errorf("vmtest: console: section %q: %w", open, err)
				}
			}
			if _, dup := c.Sections[open]; dup {
				return c, fmt.Errorf("vmtest: console: section %q printed twice", open)
			}
			c.Sections[open] = Section{Name: open, Data: data, Status: status}
			inside = false
		case line == markDone:
			if inside {
				return c, fmt.Errorf("vmtest: console: section %q not closed before the final marker", open)
			}
			c.Done = true
		case inside:
			body.WriteString(line)
			body.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		return c, fmt.Errorf("vmtest: console: %w", err)
	}
	if inside {
		return c, fmt.Errorf("vmtest: console: section %q not closed (guest stopped early?)", open)
	}
	return c, nil
}
