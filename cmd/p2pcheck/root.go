package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/internal/cli"
)

// globalOptions are the flags every command takes.
type globalOptions struct {
	root     string
	snapshot string
	format   string
	noColor  bool
	kernel   string
	noNVML   bool
	pciIDs   string

	// reads counts the bytes this run reads, from the root and every file a
	// user names (hostfs.ReadNamed(o.reads, ...)), against one budget.
	reads *hostfs.Meter

	stdout, stderr io.Writer
}

const rootLong = `p2pcheck reads sysfs and PCI configuration space, rebuilds the PCIe tree and tells
whether devices can DMA peer-to-peer exactly as the Linux kernel decides it
(drivers/pci/p2pdma.c), how NVIDIA and NCCL classify each path (PIX/PXB/PHB/NODE/SYS),
and whether the node is ready for GPUDirect P2P/RDMA and GDRCopy.

Without a command it prints the node report: every check with its status and fix,
and the one thing to fix first.

Run as root for the full picture: without CAP_SYS_ADMIN the kernel shows only the
first 64 bytes of configuration space, so ACS and port types are reported unknown.

Exit codes: 0 ready (warnings allowed), 1 a check failed, 2 warnings present and
--fail-on=warn given, 3 p2pcheck could not evaluate, 64 usage error.`

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &globalOptions{stdout: stdout, stderr: stderr, reads: hostfs.NewMeter(hostfs.DefaultBudget.RunBytes)}
	ro := &reportOptions{global: o}
	cmd := &cobra.Command{
		Use:           "p2pcheck",
		Short:         "PCIe peer-to-peer DMA and GPUDirect readiness for Linux",
		Long:          rootLong,
		Args:          noArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionLine(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return ro.run(cmd)
		},
		PersistentPreRunE: func(*cobra.Command, []string) error { return o.validate() },
	}
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return cli.Exit(exitUsage, fmt.Errorf("%w (run 'p2pcheck --help')", err))
	})
	cmd.SetVersionTemplate("{{.Version}}\n")

	pf := cmd.PersistentFlags()
	pf.StringVar(&o.root, "root", "/", "treat `DIR` as / (reads DIR/sys, DIR/proc, DIR/dev)")
	pf.StringVar(&o.snapshot, "snapshot", "", "read the machine from a snapshot `FILE` (.tar.gz) made by 'p2pcheck snapshot'")
	pf.StringVar(&o.format, "format", "text", "output format: text or json")
	pf.BoolVar(&o.noColor, "no-color", false, "never color the text output (default: color on a terminal)")
	pf.StringVar(&o.kernel, "kernel-version", "", "apply the P2PDMA host-bridge whitelist of this kernel `X.Y` (default: the analysed kernel's)")
	pf.BoolVar(&o.noNVML, "no-nvml", false, "do not ask NVML for GPU facts (sysfs and config space only)")
	pf.StringVar(&o.pciIDs, "pci-ids", "", "name devices from this pci.ids `FILE` (default: the system's, e.g. /usr/share/misc/pci.ids)")

	ro.addFlags(cmd)
	cmd.AddCommand(
		newTopoCommand(o),
		newSnapshotCommand(o),
		newPairsCommand(o),
		newPairCommand(o),
		newMatrixCommand(o),
		newGdrCommand(o),
		newNCCLCommand(o),
		newReportCommand(ro),
		newFixCommand(o),
		newDiffCommand(o),
	)
	cmd.AddCommand(newManCommand(cmd))
	usageCompletion(cmd)
	registerCompletions(cmd, o)
	runErrors(cmd)
	return cmd
}

// runErrors makes every error a command returns while running carry an exit
// code: one without a code is an I/O error (standard output closed, an output
// file that cannot be written), so p2pcheck could not evaluate (exit 3). Only
// what cobra rejects before running anything is left as a usage error.
func runErrors(cmd *cobra.Command) {
	if run := cmd.RunE; run != nil {
		cmd.RunE = func(c *cobra.Command, args []string) error {
			err := run(c, args)
			var ee *cli.ExitError
			if err != nil && !errors.As(err, &ee) {
				return noEvalError(err)
			}
			return err
		}
	}
	for _, c := range cmd.Commands() {
		runErrors(c)
	}
}

// noArgs refuses arguments. The message names the command without the
// program's name, which cli.Execute puts in front.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		if !cmd.HasParent() {
			return usageError("unexpected argument %q (commands: %s)", args[0], commandNames(cmd))
		}
		return usageError("%s: unexpected argument %q", strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" "), args[0])
	}
	return nil
}

// commandNames lists cmd's commands a user runs, for messages.
func commandNames(cmd *cobra.Command) string {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return strings.Join(names, ", ")
}

func (o *globalOptions) validate() error {
	switch o.format {
	case "text", "json":
	default:
		return usageError("--format must be text or json, not %q", o.format)
	}
	if o.snapshot != "" && o.root != "/" {
		return usageError("--root and --snapshot exclude each other")
	}
	if o.pciIDs != "" {
		// A file named on the command line must be there; one that cannot be
		// read as pci.ids (a FIFO, /dev/zero) only leaves the names out.
		if _, err := os.Lstat(o.pciIDs); errors.Is(err, fs.ErrNotExist) {
			return usageError("--pci-ids: %s does not exist", o.pciIDs)
		}
	}
	if fi, err := os.Stat(o.root); err == nil && fi.Mode().IsRegular() {
		// --root names a capture file (an rdma_topo dump): read it as --snapshot.
		o.snapshot, o.root = o.root, "/"
	}
	return nil
}

// color reports whether text output may use ANSI colors (useColor).
func (o *globalOptions) color() bool {
	return useColor(o.noColor, os.Getenv, isTerminal(o.stdout))
}

// useColor reports whether text output may use ANSI colors: only on a
// terminal, never with --no-color, NO_COLOR set (https://no-color.org) or
// TERM=dumb (a terminal that cannot show escape sequences, as Emacs' shell
// and ncurses' terminfo define it) or unset.
func useColor(noColor bool, getenv func(string) string, terminal bool) bool {
	if noColor || getenv("NO_COLOR") != "" {
		return false
	}
	if term := getenv("TERM"); term == "" || term == "dumb" {
		return false
	}
	return terminal
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
