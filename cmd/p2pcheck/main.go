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
	"fmt"
	"io"
	"os"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/internal/cli"
)

// Short names for the exit codes package check defines.
const (
	exitOK     = check.ExitPass
	exitFail   = check.ExitFail
	exitWarn   = check.ExitWarn
	exitNoEval = check.ExitNoEval
	exitUsage  = check.ExitUsage
)

func usageError(format string, args ...any) error {
	return cli.Exit(exitUsage, fmt.Errorf(format, args...))
}

func noEvalError(err error) error { return cli.Exit(exitNoEval, err) }

func main() {
	growHeapFirst()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes p2pcheck with args and returns the process exit code. A panic
// is an internal error: it is reported with its stack and exits 3 (could not
// evaluate), never with the runtime's own exit code 2, which means "warnings".
// (A panic on another goroutine cannot be caught here.)
func run(args []string, stdout, stderr io.Writer) int {
	return cli.Execute(newRootCommand(stdout, stderr), args, stderr,
		cli.Codes{OK: exitOK, Usage: exitUsage, Internal: exitNoEval})
}
