// Package cli runs p2pkit's commands the same way: a command's error carries its
// exit code, cobra's own errors (an unknown command or flag, a bad value) are
// usage errors, and a panic is reported as an internal error, never left to the
// runtime, whose exit code 2 means something else to both commands.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// ExitError carries the exit code a command wants; Err, when set, is printed.
type ExitError struct {
	Code int
	Err  error
}

// Exit returns an error that makes Execute print err (unless nil) and return code.
func Exit(code int, err error) error { return &ExitError{Code: code, Err: err} }

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// Codes are the exit codes Execute returns of itself.
type Codes struct {
	OK       int // the command returned no error
	Usage    int // cobra rejected the command line
	Internal int // the command panicked
}

// Execute runs cmd with args and returns the process exit code. Messages go to
// stderr prefixed with cmd's name: an ExitError's error, or cobra's error with a
// pointer to --help, or a panic with its stack.
func Execute(cmd *cobra.Command, args []string, stderr io.Writer, codes Codes) (code int) {
	name := cmd.Name()
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "%s: internal error: %v\n%s", name, r, debug.Stack())
			fmt.Fprintf(stderr, "%s: please report this at https://github.com/p2pkit/p2pkit/issues\n", name)
			code = codes.Internal
		}
	}()
	cmd.SetArgs(args)
	err := cmd.Execute()
	if err == nil {
		return codes.OK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Err != nil {
			fmt.Fprintf(stderr, "%s: %s\n", name, unprefixed(name, ee.Err))
		}
		return ee.Code
	}
	// The commands' own errors carry their code, so what is left is cobra's.
	fmt.Fprintf(stderr, "%s: %s\n", name, unprefixed(name, err))
	fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", name)
	return codes.Usage
}

// unprefixed is err's message without the program's name in front, which
// Execute puts there itself: a message never reads "name: name: ...".
func unprefixed(name string, err error) string {
	msg := err.Error()
	for strings.HasPrefix(msg, name+": ") {
		msg = strings.TrimPrefix(msg, name+": ")
	}
	return msg
}

// ToolExit is the exit code of a developer tool (flag package, no cobra) whose
// run returned err: 0 for none or for -h (flag.ErrHelp, the usage is already
// printed), else 2 after printing err to stderr prefixed with name.
func ToolExit(name string, err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return 2
}
