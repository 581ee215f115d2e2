// Command p2pcheck tells whether the PCIe devices of a Linux machine can DMA
// peer-to-peer, exactly as the kernel decides it, how NVIDIA and NCCL classify each
// path, and whether the node is ready for GPUDirect and GDRCopy.
//
// Run "p2pcheck --help" for the commands. Exit codes: 0 ready (warnings allowed),
// 1 a check failed, 2 warnings with --fail-on=warn, 3 could not evaluate, 64 usage.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Exit codes shared with the JSON "overall" field (DESIGN.md "Exit codes").
const (
	exitOK       = 0
	exitFail     = 1
	exitWarn     = 2
	exitNoEval   = 3
	exitUsage    = 64
	exitInternal = 70
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

// run executes p2pcheck with args and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
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
	// Anything cobra reports itself (unknown command or flag, bad arguments) is a
	// usage error.
	fmt.Fprintln(stderr, "p2pcheck:", err)
	fmt.Fprintln(stderr, "Run 'p2pcheck --help' for usage.")
	return exitUsage
}
