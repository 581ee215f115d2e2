package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/p2pkit/p2pkit/sysfs"
)

func newSnapshotCommand(o *globalOptions) *cobra.Command {
	var out string
	var force bool
	cmd := &cobra.Command{
		Use:   "snapshot -o FILE.tar.gz",
		Short: "Capture this machine's PCI sysfs, config space and platform facts for a bug report",
		Long: `snapshot writes a gzip'd tar of everything p2pcheck reads: for every PCI function its
sysfs directory (attributes, config space, driver, IOMMU group and SR-IOV links), the
IOMMU group types, /proc/cpuinfo, cmdline, modules, devices, version, the NVIDIA and
gdrdrv /proc files and the mode of /dev/gdrdrv. It never reads BAR resource files or
anything with side effects. Run it as root, or ACS and port types cannot be captured.

Any p2pcheck command reads the file back with --snapshot FILE.`,
		Example: "  sudo p2pcheck snapshot -o $(hostname)-p2p.tar.gz\n  p2pcheck --snapshot $(hostname)-p2p.tar.gz topo",
		Args:    noArgs,
		RunE: func(*cobra.Command, []string) error {
			if out == "" {
				return usageError("snapshot: -o FILE is required ('-' for standard output)")
			}
			src, err := o.openFS()
			if err != nil {
				return err
			}
			defer src.Close()
			var sum sysfs.SnapshotSummary
			capture := func(w io.Writer) (err error) {
				sum, err = sysfs.WriteSnapshot(src, w)
				return err
			}
			if out == "-" {
				err = capture(o.stdout)
			} else {
				err = writeFileAtomic(out, force, func(f *os.File) error { return capture(f) })
			}
			if err != nil {
				return err
			}
			for _, e := range sum.Skipped {
				fmt.Fprintln(o.stderr, "p2pcheck: snapshot: left out:", e)
			}
			if out != "-" {
				fmt.Fprintf(o.stderr, "p2pcheck: wrote %s (%d members, %d files left out)\n", out, sum.Members, len(sum.Skipped))
			}
			if len(sum.Skipped) > 0 && os.Geteuid() != 0 {
				fmt.Fprintln(o.stderr, "p2pcheck: run as root for a complete snapshot (config space past 64 bytes, root-only files)")
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the snapshot to `FILE` ('-' for standard output)")
	cmd.Flags().BoolVar(&force, "force", false, "replace FILE if it exists")
	return cmd
}
