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
// Exit codes: 0 success, 1 a test or benchmark failed (or an internal error),
// 2 gdrdrv not usable, 3 no GPU to work on, 64 usage error.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/p2pkit/p2pkit/internal/buildinfo"
	"github.com/p2pkit/p2pkit/internal/cli"
	"github.com/p2pkit/p2pkit/internal/cuda"
)

const (
	exitOK       = 0
	exitFail     = 1
	exitNotReady = 2
	exitNoGPU    = 3
	exitUsage    = 64
)

func failError(err error) error { return cli.Exit(exitFail, err) }

func usageError(format string, args ...any) error {
	return cli.Exit(exitUsage, fmt.Errorf(format, args...))
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

// run executes gdrbench with args and returns the process exit code. A panic
// is an internal error: it is reported with its stack and exits 1, never with
// the runtime's own exit code 2, which means "gdrdrv not usable".
func run(args []string, stdout, stderr io.Writer) int {
	cmd := newRootCommand(stdout, stderr)
	cmd.Version = versionLine()
	cmd.SetVersionTemplate("{{.Version}}\n")
	cmd.SetOut(stdout)
	return cli.Execute(cmd, args, stderr, cli.Codes{OK: exitOK, Usage: exitUsage, Internal: exitFail})
}
