package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/p2pkit/p2pkit/snapshot"
)

func newSnapshotCommand(o *globalOptions) *cobra.Command {
	var out string
	var force, noRedact bool
	cmd := &cobra.Command{
		Use:   "snapshot -o FILE.tar.gz",
		Short: "Capture this machine's PCI sysfs, config space and platform facts for a bug report",
		Long: `snapshot writes a gzip'd tar of everything p2pcheck reads: for every PCI function its
sysfs directory (attributes, config space, driver, IOMMU group and SR-IOV links), the
IOMMU group types, /proc/cpuinfo, cmdline, modules, devices, version, the NVIDIA and
gdrdrv /proc files and the mode of /dev/gdrdrv. It never reads BAR resource files or
anything with side effects. Run it as root, or ACS and port types cannot be captured.
Where NVML answers, the NVML facts p2pcheck uses (GPU names, UUIDs, NVLinks, P2P
status, BAR1, driver and CUDA versions) are recorded too, so every command gives on
the snapshot the answer it gives live.

Snapshots are meant to be shared, so by default they are redacted: the Device Serial
Number in config space is zeroed, vpd and serial_number are not captured, GPU UUIDs
and the host name are replaced. --no-redact keeps them. The archive's p2pkit/manifest.json
says what was redacted and whether config space was captured truncated.

Any p2pcheck command reads the file back with --snapshot FILE.`,
		Example: "  sudo p2pcheck snapshot -o $(hostname)-p2p.tar.gz\n  p2pcheck --snapshot $(hostname)-p2p.tar.gz topo",
		Args:    noArgs,
		RunE: func(*cobra.Command, []string) error {
			if out == "" {
				return usageError("snapshot: -o FILE is required ('-' for standard output)")
			}
			src, err := o.openRoot()
			if err != nil {
				return err
			}
			defer src.Close()
			var sum snapshot.Summary
			opt := snapshot.Options{NoRedact: noRedact, NVML: o.nvmlRecord(!noRedact)}
			opt.NCCL, opt.NCCLConf = o.ncclRecord()
			capture := func(w io.Writer) (err error) {
				sum, err = snapshot.WriteOptions(src, w, opt)
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
			if n := sum.Manifest.TruncatedConfigs; n > 0 {
				fmt.Fprintf(o.stderr, "p2pcheck: warning: config space of %d function(s) captured truncated to 64 bytes: "+
					"run as root for ACS, port types and extended capabilities\n", n)
			} else if len(sum.Skipped) > 0 && os.Geteuid() != 0 {
				fmt.Fprintln(o.stderr, "p2pcheck: run as root for a complete snapshot (root-only files)")
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the snapshot to `FILE` ('-' for standard output)")
	cmd.Flags().BoolVar(&force, "force", false, "replace FILE if it exists")
	cmd.Flags().BoolVar(&noRedact, "no-redact", false, "keep device serial numbers (DSN, serial_number), VPD, GPU UUIDs and the host name (reading VPD is slow on some devices)")
	return cmd
}
