// Command gdrbench tests and measures GDRCopy on one GPU: the CPU loading and
// storing GPU memory through a gdrdrv BAR1 mapping. Its commands mirror the
// tools of NVIDIA GDRCopy (tests/): sanity (gdrcopy_sanity), copybw
// (gdrcopy_copybw), copylat (gdrcopy_copylat) and apiperf (gdrcopy_apiperf),
// with their flags and output, plus --format json.
//
// Device memory comes from the CUDA driver (libcuda.so.1, loaded at run time),
// or with --va/--size from a range the caller already has. When gdrdrv is not
// usable gdrbench says what is missing and how to fix it, and exits 2; copylat
// still measures the cuMemcpy baseline first when a GPU is present.
//
// Exit codes: 0 success, 1 a test or benchmark failed, 2 gdrdrv not usable,
// 3 no GPU to work on, 64 usage error.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/p2pkit/p2pkit/internal/buildinfo"
	"github.com/p2pkit/p2pkit/internal/cuda"
)

const (
	exitOK       = 0
	exitFail     = 1
	exitNotReady = 2
	exitNoGPU    = 3
	exitUsage    = 64
)

// exitError carries the exit code a command wants; err, when set, is printed.
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

func failError(err error) error { return &exitError{code: exitFail, err: err} }

func usageError(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// versionLine is what --version prints: version, commit, and whether CUDA
// support (device memory allocation through libcuda) is built in; the gdrdrv
// client itself is pure Go and always is.
func versionLine() string {
	return buildinfo.Line("gdrbench", buildinfo.Feature{Name: "CUDA", Built: cuda.BuiltIn})
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes gdrbench with args and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := newRootCommand(stdout, stderr)
	cmd.Version = versionLine()
	cmd.SetVersionTemplate("{{.Version}}\n")
	cmd.SetOut(stdout)
	cmd.SetArgs(args)
	err := cmd.Execute()
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "gdrbench:", ee.err)
		}
		return ee.code
	}
	// What cobra reports itself (unknown command or flag, bad value) is usage.
	fmt.Fprintln(stderr, "gdrbench:", err)
	fmt.Fprintln(stderr, "Run 'gdrbench --help' for usage.")
	return exitUsage
}
