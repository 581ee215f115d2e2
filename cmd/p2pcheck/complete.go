package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/node"
)

// maxDeviceCompletions bounds the addresses a completion offers: a shell
// cannot show more usefully, and a machine may have tens of thousands.
const maxDeviceCompletions = 1000

// usageCompletion makes cobra's "completion" command refuse a shell it does
// not know as a usage error (exit 64) instead of printing its help and
// exiting 0.
func usageCompletion(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		var shells []string
		for _, sh := range c.Commands() {
			shells = append(shells, sh.Name())
		}
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError("completion: unknown shell %q (one of %s)", args[0], strings.Join(shells, ", "))
			}
			return cmd.Help()
		}
	}
}

// registerCompletions teaches the shell completion the values of the flags
// that take a fixed set (--format, --fail-on, --require, --check), which
// flags name directories or snapshots, and the device addresses of the
// machine being read (live, --root or --snapshot) for the commands that take
// devices.
func registerCompletions(root *cobra.Command, o *globalOptions) {
	fixed := func(values ...string) cobra.CompletionFunc {
		return cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)
	}
	register := func(c *cobra.Command, flag string, f cobra.CompletionFunc) {
		if c.Flags().Lookup(flag) == nil && c.PersistentFlags().Lookup(flag) == nil {
			return
		}
		if err := c.RegisterFlagCompletionFunc(flag, f); err != nil {
			panic(err) // a flag registered twice: a programming error
		}
	}
	register(root, "format", func(c *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		formats := []string{"text", "json"}
		if c.Name() == "topo" || c.Name() == "diff" {
			formats = append(formats, "dot")
		}
		return formats, cobra.ShellCompDirectiveNoFileComp
	})
	register(root, "root", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return nil, cobra.ShellCompDirectiveFilterDirs
	})
	register(root, "snapshot", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return []string{"gz", "tgz"}, cobra.ShellCompDirectiveFilterFileExt
	})
	register(root, "kernel-version", cobra.NoFileCompletions)
	var caps []string
	for _, c := range check.Capabilities() {
		caps = append(caps, string(c))
	}
	for _, c := range []*cobra.Command{root, findCommand(root, "report"), findCommand(root, "gdr"), findCommand(root, "diff")} {
		if c == nil {
			continue
		}
		register(c, "fail-on", fixed("fail", "warn"))
		register(c, "check", fixed(check.IDs()...))
		register(c, "require", listCompletion(caps))
		register(c, "interval", fixed("5m", "15m", "1h"))
		register(c, "pid", cobra.NoFileCompletions)
		register(c, "aer-threshold", cobra.NoFileCompletions)
		register(c, "nfd-expiry", fixed("20m", "1h"))
	}
	if c := findCommand(root, "pair"); c != nil {
		c.ValidArgsFunction = func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) >= 2 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return o.completeDevices(toComplete), cobra.ShellCompDirectiveNoFileComp
		}
	}
}

func findCommand(root *cobra.Command, name string) *cobra.Command {
	for _, c := range root.Commands() {
		if c.Name() == name {
			return c
		}
	}
	return nil
}

// listCompletion completes a comma-separated list of values: the part after
// the last comma, with the values not yet in the list.
func listCompletion(values []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		done, _, _ := cutLast(toComplete, ",")
		prefix := ""
		var have []string
		if strings.Contains(toComplete, ",") {
			prefix = done + ","
			have = strings.Split(done, ",")
		}
		var out []string
		for _, v := range values {
			if !slices.Contains(have, v) {
				out = append(out, prefix+v)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}

func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return "", s, false
}

// completeDevices lists the PCI addresses of the machine the flags name (the
// live one, --root or --snapshot), read as every command reads it (within the
// read budgets), that start with toComplete; at most maxDeviceCompletions. A
// short address ("41:00.0") completes too. Nothing when the machine cannot be
// read: completion never prints errors.
func (o *globalOptions) completeDevices(toComplete string) []string {
	if o.validate() != nil {
		return nil
	}
	n, err := o.loadWith(node.Options{NoPlatform: true, NoNames: true, NoGPU: true})
	if err != nil {
		return nil
	}
	var out []string
	for _, d := range n.Topology.Devices {
		a := d.Address.String()
		short := strings.TrimPrefix(a, "0000:")
		switch {
		case strings.HasPrefix(a, toComplete):
			out = append(out, a)
		case short != a && strings.HasPrefix(short, toComplete):
			out = append(out, short)
		default:
			continue
		}
		if len(out) == maxDeviceCompletions {
			break
		}
	}
	slices.Sort(out)
	return out
}

// newManCommand is "p2pcheck man DIR": a man page (section 1) for every
// command, written by writeManPage into DIR as p2pcheck.1,
// p2pcheck-topo.1, ... Each file is written atomically and replaced if it
// exists. The pages are dated SOURCE_DATE_EPOCH when set (reproducible
// builds, https://reproducible-builds.org/specs/source-date-epoch/), else today.
func newManCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "man DIR",
		Short: "Write a man page for every command into DIR (p2pcheck.1, p2pcheck-topo.1, ...)",
		Example: "  p2pcheck man /usr/local/share/man/man1\n" +
			"  p2pcheck man . && man ./p2pcheck-pair.1",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("man: want one directory, DIR (got %d arguments)", len(args))
			}
			return nil
		},
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return nil, cobra.ShellCompDirectiveFilterDirs
		},
		RunE: func(_ *cobra.Command, args []string) error {
			date := time.Now()
			if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
				sec, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					return usageError("SOURCE_DATE_EPOCH %q is not a number of seconds", s)
				}
				date = time.Unix(sec, 0).UTC()
			}
			return writeManPages(root, manHeader{date: date, source: "p2pkit " + version(), manual: "p2pkit manual", section: "1"}, args[0])
		},
	}
}

// writeManPages writes the page of cmd and of every command below it that a
// user can run (not hidden, not cobra's internal ones) into dir.
func writeManPages(cmd *cobra.Command, hdr manHeader, dir string) error {
	for _, c := range cmd.Commands() {
		if !c.IsAvailableCommand() || c.IsAdditionalHelpTopicCommand() {
			continue
		}
		if err := writeManPages(c, hdr, dir); err != nil {
			return err
		}
	}
	name := filepath.Join(dir, manPageName(cmd))
	err := writeFileAtomic(name, true, func(f *os.File) error { return writeManPage(f, cmd, hdr) })
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}

// manPageName is the file of cmd's man page: "p2pcheck-topo.1".
func manPageName(cmd *cobra.Command) string {
	return strings.ReplaceAll(cmd.CommandPath(), " ", "-") + ".1"
}
