package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestExecute(t *testing.T) {
	codes := Codes{OK: 0, Usage: 64, Internal: 3}
	tests := []struct {
		name   string
		args   []string
		runE   func() error
		code   int
		stderr []string // substrings, in order
	}{
		{name: "ok", runE: func() error { return nil }, code: 0},
		{name: "code only", runE: func() error { return Exit(1, nil) }, code: 1},
		{name: "code and message", runE: func() error { return Exit(2, errors.New("gdrdrv is not loaded")) },
			code: 2, stderr: []string{"tool: gdrdrv is not loaded\n"}},
		{name: "wrapped", runE: func() error { return fmt.Errorf("context: %w", Exit(5, errors.New("inner"))) },
			code: 5, stderr: []string{"tool: inner\n"}},
		{name: "unknown flag", args: []string{"--bogus"}, runE: func() error { return nil },
			code: 64, stderr: []string{"tool: unknown flag: --bogus\n", "Run 'tool --help' for usage.\n"}},
		{name: "own name not repeated", runE: func() error { return Exit(64, errors.New("tool: tool: bad value")) },
			code: 64, stderr: []string{"tool: bad value\n"}},
		{name: "own name not repeated, cobra's", runE: func() error { return errors.New("tool: bad") },
			code: 64, stderr: []string{"tool: bad\n"}},
		{name: "panic", runE: func() error { panic("boom") },
			code: 3, stderr: []string{"tool: internal error: boom\n", "goroutine ", "tool: please report this"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := &cobra.Command{Use: "tool", SilenceErrors: true, SilenceUsage: true,
				RunE: func(*cobra.Command, []string) error { return tt.runE() }}
			var stderr bytes.Buffer
			if code := Execute(cmd, tt.args, &stderr, codes); code != tt.code {
				t.Errorf("exit %d, want %d", code, tt.code)
			}
			rest := stderr.String()
			for _, want := range tt.stderr {
				i := strings.Index(rest, want)
				if i < 0 {
					t.Fatalf("stderr %q lacks %q", stderr.String(), want)
				}
				rest = rest[i+len(want):]
			}
			if strings.Contains(stderr.String(), "tool: tool:") {
				t.Errorf("stderr %q repeats the program's name", stderr.String())
			}
			if len(tt.stderr) == 0 && stderr.Len() != 0 {
				t.Errorf("stderr %q, want nothing", stderr.String())
			}
		})
	}
}

func TestExitErrorText(t *testing.T) {
	if got := Exit(3, nil).Error(); got != "exit 3" {
		t.Errorf("Exit(3, nil) = %q", got)
	}
	inner := errors.New("x")
	if err := Exit(1, inner); !errors.Is(err, inner) || err.Error() != "x" {
		t.Errorf("Exit(1, x) = %q, Is(x) %v", err, errors.Is(err, inner))
	}
}

func TestToolExit(t *testing.T) {
	for _, tt := range []struct {
		err    error
		code   int
		stderr string
	}{
		{nil, 0, ""},
		{flag.ErrHelp, 0, ""},
		{fmt.Errorf("parse: %w", flag.ErrHelp), 0, ""},
		{errors.New("want -o DIR"), 2, "tool: want -o DIR\n"},
	} {
		var stderr bytes.Buffer
		if code := ToolExit("tool", tt.err, &stderr); code != tt.code || stderr.String() != tt.stderr {
			t.Errorf("ToolExit(%v) = %d, %q; want %d, %q", tt.err, code, stderr.String(), tt.code, tt.stderr)
		}
	}
}
