package main

import (
	"github.com/spf13/cobra"

	"github.com/p2pkit/p2pkit/check"
)

// newGdrCommand is "p2pcheck gdr": the report restricted to GDRCopy readiness.
func newGdrCommand(o *globalOptions) *cobra.Command {
	ro := &reportOptions{global: o, failOn: "fail", quick: true, requireCaps: []check.Capability{check.CapGDRCopy}}
	cmd := &cobra.Command{
		Use:   "gdr",
		Short: "Check GDRCopy readiness: gdrdrv module, /dev/gdrdrv, major, mode, version, params, flavour",
		Long: `gdr runs the GDRCopy part of the report: the NVIDIA driver's version and flavour
(open or proprietary) and gdrdrv itself, with the rules gdrbench uses too: loaded,
its major in /proc/devices, /dev/gdrdrv a character device with that major and
minor 0, usable by every user (mode 0666), its version and build flavour from
/proc/driver/gdrdrv/params. A gdrdrv built for the proprietary driver works with
the open one (GDRCopy's README): that is information, except on coherent arm64
platforms (slower) and in Intel TDX guests (broken). See docs/checks/gdrdrv.md.

Exit codes are those of the report: 0 ready (warnings allowed), 1 a check failed,
2 warnings with --fail-on=warn, 3 could not evaluate, 64 usage error.`,
		Example: "  p2pcheck gdr\n  p2pcheck gdr --format json",
		Args:    noArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := ro.validate(); err != nil {
				return err
			}
			return ro.report(check.GDRIDs)
		},
	}
	cmd.Flags().StringVar(&ro.failOn, "fail-on", "fail", "lowest status that makes the exit code non-zero: fail, or warn (exit 2)")
	return cmd
}
