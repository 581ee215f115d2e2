// Command p2pcheck tells whether the PCIe devices of a Linux machine can DMA
// peer-to-peer, exactly as the kernel decides it, how NVIDIA and NCCL classify each
// path, and whether the node is ready for GPUDirect and GDRCopy.
//
// Run "p2pcheck --help" for the commands. Exit codes (package check defines
// them): 0 ready (warnings allowed), 1 a check failed, 2 warnings with
// --fail-on=warn, 3 could not evaluate (including I/O and internal errors),
// 64 usage error.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/p2pkit/p2pkit/check"
)

// Short names for the exit codes package check defines.
const (
	exitOK     = check.ExitPass
	exitFail   = check.ExitFail
	exitWarn   = check.ExitWarn
	exitNoEval = check.ExitNoEval
	exitUsage  = check.ExitUsage
)

// exitError carries the exit code a command wants, with an optional message.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

func usageError(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

func noEvalError(err error) error { return &exitError{code: exitNoEval, err: err} }

func main() {
	growHeapFirst()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes p2pcheck with args and returns the process exit code. A panic
// is an internal error: it is reported with its stack and exits 3 (could not
// evaluate), never with the runtime's own exit code 2, which means "warnings".
// (A panic on another goroutine cannot be caught here.)
func run(args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "p2pcheck: internal error: %v\n%s", r, debug.Stack())
			fmt.Fprintln(stderr, "p2pcheck: please report this at https://github.com/p2pkit/p2pkit/issues")
			code = exitNoEval
		}
	}()
	cmd := newRootCommand(stdout, stderr)
	cmd.SetArgs(args)
	err := cmd.Execute()
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "p2pcheck:", ee.err)
		}
		return ee.code
	}
	// Errors of the commands themselves carry their code (see runErrors), so
	// what is left is cobra's own: an unknown command or bad arguments.
	fmt.Fprintln(stderr, "p2pcheck:", err)
	fmt.Fprintln(stderr, "Run 'p2pcheck --help' for usage.")
	return exitUsage
}
