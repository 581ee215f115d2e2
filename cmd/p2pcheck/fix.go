package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
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
	global    *globalOptions
	apply     bool
	persist   bool
	pairs     []string
	virtHost  bool
	bareMetal bool
}

func newFixCommand(o *globalOptions) *cobra.Command {
	fo := &fixOptions{global: o}
	cmd := &cobra.Command{
		Use:   "fix [--apply] [--persist] [--pairs A,B,...] [--virt-host|--bare-metal]",
		Short: "Make the peer paths P2P-ready: set ACS on exactly the bridges between peers, for bare metal or a virtualization host (dry run by default)",
		Long: `fix plans what makes the node's peer paths ready for what the node is for and, by
default, only prints it:

  runtime     on bare metal, clear RR, CR and EC (mask 0x002c, what
              pci_bridge_has_acs_redir() in drivers/pci/p2pdma.c tests) in ACS Control
              on exactly the functions the kernel checks between the pairs of interest
              (GPU<->NIC, GPU<->NVMe, GPU<->GPU, p2pmem providers<->other devices); on
              a virtualization host (--virt-host, or found from the ConnectX NICs' ATS
              capability), keep SV, RR, CR and UF for separate IOMMU groups and set
              Direct Translated P2P where a peer with ATS sends translated requests;
              on NVIDIA's Data Direct, inline and NUMA shapes, the bits the shape
              needs. Each by read-modify-write of that one register through sysfs
              config, every other bit kept;
  persistent  the boot parameter that keeps the same values, in the form the kernel
              parses (pci=disable_acs_redir= up to 6.10, pci=config_acs= from the fixed
              6.12.23, 6.13.11, 6.14.2 and 6.15; none on the broken 6.11 to 6.14.1
              parser), devices named by path from their root bus; printed, and with
              --persist written to /etc/default/grub.d/ (and passed to grubby where it
              exists), with the IOMMU groups a reboot with it gives;
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
	f.BoolVar(&fo.virtHost, "virt-host", false, "plan for a host that passes devices to VMs: keep isolation, set Direct Translated P2P (default: found from the ConnectX NICs' ATS capability)")
	f.BoolVar(&fo.bareMetal, "bare-metal", false, "plan for bare metal even where the NICs' ATS says virtualization host: ACS redirect off between peers")
	return cmd
}

func (fo *fixOptions) run() error {
	o := fo.global
	switch {
	case o.snapshot != "" && (fo.apply || fo.persist):
		return usageError("fix: --apply and --persist change a machine, not a snapshot")
	case fo.virtHost && fo.bareMetal:
		return usageError("fix: --virt-host and --bare-metal exclude each other")
	case fo.apply && o.root == "/" && geteuid() != 0:
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
	opt, reason, modeErr := fo.options(n)
	if modeErr != nil {
		return modeErr
	}
	plan := provision.NewPlan(n.Topology, n.P2P(), pairs, opt.Options)
	if opt.ModeUnknown != "" {
		plan.Unknown = append(plan.Unknown, "what the plan is for: "+opt.ModeUnknown)
		reason = "unknown"
	}
	rep, err := fo.execute(n, plan)
	if err != nil {
		return err
	}
	rep.UseReason = reason
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

// options returns what the plan is for and how that was decided; an empty reason
// with opt.ModeUnknown set means it could not be told. A virtualization-host plan
// asked for on the Data Direct shape is a usage error.
func (fo *fixOptions) options(n *node.Node) (fixPlanOptions, string, error) {
	opt := fixPlanOptions{Options: provision.Options{Kernel: n.Release(), IOMMU: len(n.Platform.IOMMUGroups) > 0}}
	shapes := provision.FindShapes(n.Topology)
	switch {
	case fo.virtHost:
		for _, s := range shapes {
			if s.Kind == provision.ShapeDataDirect {
				return opt, "", usageError("fix: --virt-host: the Data Direct shape has no virtualization-host plan (rdma_topo refuses it too)")
			}
		}
		opt.Mode = provision.ModeVirtHost
		return opt, "--virt-host", nil
	case fo.bareMetal:
		opt.Mode = provision.ModeBareMetal
		return opt, "--bare-metal", nil
	}
	mode, why, err := provision.DetectMode(n.Topology.Devices, shapes)
	if err != nil {
		opt.Mode, opt.ModeUnknown = provision.ModeBareMetal, err.Error()
		return opt, "", nil
	}
	opt.Mode = mode
	return opt, why, nil
}

// fixPlanOptions are the plan's options and why the mode could not be told.
type fixPlanOptions struct {
	provision.Options
	ModeUnknown string
}

// execute performs --apply and --persist as asked and returns the report.
func (fo *fixOptions) execute(n *node.Node, plan provision.Plan) (provision.Report, error) {
	o := fo.global
	var (
		done       []provision.Done
		after      []p2pdma.Verdict
		mismatched []int
	)
	if fo.apply && len(plan.Unknown) == 0 && len(plan.Actions) > 0 {
		done, _ = provision.Apply(o.root, plan)
		n2, err := o.load()
		if err != nil {
			return provision.Report{}, err
		}
		after, mismatched = plan.Compare(n2.Topology, n2.P2P())
	}
	rep := plan.NewReport(fo.apply, done, after, mismatched)
	rep.Advice = fo.advice(n)
	if c := n.Platform.Cmdline; c != nil {
		rep.CheckLength(c.Raw, plan.Boot)
	}
	if fo.apply && len(plan.Unknown) == 0 && len(plan.Decided) > 0 {
		if err := provision.WriteState(o.root, plan.State()); err != nil {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("recording what --apply set in /%s: %v", provision.StatePath, err))
		}
	}
	if fo.persist {
		fo.persistPlan(plan, &rep)
	}
	return rep, nil
}

// persistPlan writes the drop-in when a parameter keeps the plan and fits.
func (fo *fixOptions) persistPlan(plan provision.Plan, rep *provision.Report) {
	switch {
	case len(plan.Unknown) > 0 || plan.Boot.Form == provision.FormNone:
		return
	case !plan.Boot.Usable() || !rep.Persistent.Fits:
		rep.Warnings = append(rep.Warnings, "--persist wrote nothing: no boot parameter keeps this plan on this kernel (see Persistent)")
		rep.Result, rep.ExitCode = provision.ResultNotFixed, provision.ExitNotFixed
		return
	}
	if err := plan.WriteDropIn(fo.global.root); err != nil {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("writing the drop-in: %v", err))
		rep.Result, rep.ExitCode = provision.ResultNotFixed, provision.ExitNotFixed
		return
	}
	rep.Persistent.Written = true
	rep.Warnings = append(rep.Warnings, fo.grubby(plan)...)
}

// selectPairs returns the pairs of interest, or with --pairs every ordered pair
// among the named devices.
func (fo *fixOptions) selectPairs(n *node.Node) ([][2]*pcie.Device, error) {
	if len(fo.pairs) == 0 {
		devs := n.Interesting()
		for _, d := range n.Topology.Devices {
			if provision.IsDataDirect(d) && !slices.Contains(devs, d) {
				devs = append(devs, d)
			}
		}
		return provision.PairsOfInterest(devs), nil
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
