package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/internal/cli"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/provision"
	"github.com/p2pkit/p2pkit/render"
)

// fixAdviceIDs are the checks whose fixes `fix` names but never applies.
var fixAdviceIDs = []string{"iommu_mode", "gpudirect_rdma", "gdrdrv", "memlock_limit"}

// geteuid is a seam for tests of the root-only refusal.
var geteuid = os.Geteuid

type fixOptions struct {
	global  *globalOptions
	apply   bool
	persist bool
	pairs   []string
}

func newFixCommand(o *globalOptions) *cobra.Command {
	fo := &fixOptions{global: o}
	cmd := &cobra.Command{
		Use:   "fix [--apply] [--persist] [--pairs A,B,...]",
		Short: "Make the peer paths P2P-ready: clear ACS redirect on exactly the bridges between peers (dry run by default)",
		Long: `fix plans what makes the node's peer paths P2P-ready and, by default, only prints it:

  runtime     clear RR, CR and EC (mask 0x002c, what pci_bridge_has_acs_redir() in
              drivers/pci/p2pdma.c tests) in ACS Control on exactly the functions that
              stand between the pairs of interest (GPU<->NIC, GPU<->NVMe, GPU<->GPU,
              p2pmem providers<->other devices), by read-modify-write of that one
              register through sysfs config, every other bit kept;
  persistent  the pci=disable_acs_redir= boot parameter for the same functions, named
              by path from their root bus so that bus renumbering does not move it;
              printed, and with --persist written to /etc/default/grub.d/ (and passed
              to grubby where it exists);
  advice      IOMMU passthrough, gdrdrv, nvidia-peermem and the memlock limit: named,
              never applied.

Each pair's verdict after the runtime actions is predicted with the same engine as
'p2pcheck pairs --assume'. --apply (root only) performs the runtime actions, reads
every register back, reads the machine again and shows each pair before -> after;
it fails if anything differs from the prediction. A second run finds nothing to do.

ACS is an isolation feature: fix says which IOMMU groups each change affects. The
kernel caches a verdict per provider and client once a driver asked for it, so run
--apply at boot before the GPU, NIC and NVMe drivers bind, or rebind the providers.

Exit codes: 0 nothing to do, planned (dry run) or fixed; 1 something could not be
fixed (a write failed, a register or verdict is not as predicted, or --apply
without root); 3 some pair could not be evaluated; 64 usage error.`,
		Example: "  sudo p2pcheck fix\n  sudo p2pcheck fix --apply --format json\n  sudo p2pcheck fix --apply --pairs gpu0,mlx5_0\n  sudo p2pcheck fix --persist",
		Args:    noArgs,
		RunE:    func(*cobra.Command, []string) error { return fo.run() },
	}
	f := cmd.Flags()
	f.BoolVar(&fo.apply, "apply", false, "perform the runtime actions (root only), read them back and re-evaluate")
	f.BoolVar(&fo.persist, "persist", false, "write the boot parameter as a drop-in in /etc/default/grub.d/ (and run grubby where present)")
	f.StringSliceVar(&fo.pairs, "pairs", nil, "only the pairs among these devices, `A,B,...` (addresses, gpuN, interface, RDMA or NVMe names)")
	return cmd
}

func (fo *fixOptions) run() error {
	o := fo.global
	if o.snapshot != "" && (fo.apply || fo.persist) {
		return usageError("fix: --apply and --persist change a machine, not a snapshot")
	}
	if fo.apply && o.root == "/" && geteuid() != 0 {
		return cli.Exit(exitFail, errors.New("fix --apply changes PCI config space and needs root "+
			"(CAP_SYS_ADMIN); nothing was changed. Run 'sudo p2pcheck fix --apply', or 'p2pcheck fix' for the plan"))
	}
	n, err := o.load()
	if err != nil {
		return err
	}
	pairs, err := fo.selectPairs(n)
	if err != nil {
		return err
	}
	plan := provision.NewPlan(n.Topology, n.P2P(), pairs)
	var (
		done       []provision.Done
		after      []p2pdma.Verdict
		mismatched []int
	)
	if fo.apply && len(plan.Unknown) == 0 && len(plan.Actions) > 0 {
		done, _ = provision.Apply(o.root, plan)
		n2, err := o.load()
		if err != nil {
			return err
		}
		after, mismatched = plan.Compare(n2.Topology, n2.P2P())
	}
	rep := plan.NewReport(fo.apply, done, after, mismatched)
	rep.Advice = fo.advice(n)
	if fo.persist && len(plan.Unknown) == 0 && plan.KernelParam != "" {
		if err := plan.WriteDropIn(o.root); err != nil {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("writing the drop-in: %v", err))
			rep.Result, rep.ExitCode = provision.ResultNotFixed, provision.ExitNotFixed
		} else {
			rep.Persistent.Written = true
			rep.Warnings = append(rep.Warnings, fo.grubby(plan)...)
		}
	}
	if o.format == "json" {
		err = rep.WriteJSON(o.stdout)
	} else {
		o.printWarnings(n)
		var b strings.Builder
		if err = rep.WriteText(&b); err == nil {
			_, err = io.WriteString(o.stdout, render.EscapeLines(b.String()))
		}
	}
	if err != nil {
		return err
	}
	if rep.ExitCode != 0 {
		return cli.Exit(rep.ExitCode, nil)
	}
	return nil
}

// selectPairs returns the pairs of interest, or with --pairs every ordered pair
// among the named devices.
func (fo *fixOptions) selectPairs(n *node.Node) ([][2]*pcie.Device, error) {
	if len(fo.pairs) == 0 {
		return provision.PairsOfInterest(n.Interesting()), nil
	}
	if len(fo.pairs) < 2 {
		return nil, usageError("fix: --pairs wants at least two devices, A,B")
	}
	var devs []*pcie.Device
	for _, name := range fo.pairs {
		d, err := n.Resolve(name)
		if err != nil {
			return nil, usageError("fix: --pairs: %v", err)
		}
		for _, x := range devs {
			if x == d {
				return nil, usageError("fix: --pairs names %s twice", d.Address)
			}
		}
		devs = append(devs, d)
	}
	return provision.AllPairs(devs), nil
}

// advice runs the readiness checks whose fixes fix names but never applies and
// keeps those that are not passing.
func (fo *fixOptions) advice(n *node.Node) []provision.Advice {
	ro := &reportOptions{global: fo.global}
	in := ro.gather(n, func() (*gpu.Facts, error) { return nil, errors.New("not asked by fix") })
	results, err := check.Run(check.NewFacts(n, in), fixAdviceIDs)
	if err != nil {
		return nil
	}
	// The statuses read as the report gives them, under the default requirements.
	results = check.Judge(results, nil)
	out := []provision.Advice{}
	for _, r := range results {
		if r.Status == check.Pass || r.Status == check.Skip {
			continue
		}
		out = append(out, provision.Advice{ID: r.ID, Status: string(r.Status), Summary: r.Summary, Remediation: r.Remediation})
	}
	return out
}

// grubby passes the boot parameter to grubby on a live machine that has it, and
// returns what went wrong, if anything, as warnings.
func (fo *fixOptions) grubby(plan provision.Plan) []string {
	if fo.global.root != "/" {
		return nil
	}
	args := plan.GrubbyArgs()
	path, err := exec.LookPath(args[0])
	if err != nil {
		return nil
	}
	if out, err := exec.Command(path, args[1:]...).CombinedOutput(); err != nil {
		return []string{fmt.Sprintf("grubby: %v: %s", err, out)}
	}
	return nil
}
