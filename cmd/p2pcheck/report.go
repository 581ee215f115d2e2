package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/spf13/cobra"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/check/probe"
	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/internal/cli"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/provision"
	"github.com/p2pkit/p2pkit/render"
)

// Seams for tests: the report's host name and time.
var (
	hostname = os.Hostname
	now      = time.Now
)

// minInterval is the shortest --interval: node_exporter scrapes every 15 s or
// more, and a run costs a read of the whole machine.
const minInterval = 10 * time.Second

// reportOptions are the flags of the report (the root command and "report").
type reportOptions struct {
	global *globalOptions

	failOn     string
	quick      bool
	checks     []string
	probe      bool
	prometheus string
	nfd        string
	nfdTTL     time.Duration
	pid        int // --pid: the job process memlock_limit and nccl_env judge

	// require, config and aerThreshold are --require, --config and
	// --aer-threshold; resolve turns them, with the configuration file, into
	// requireCaps and aerThreshold.
	require      string
	config       string
	aerThreshold uint64
	requireCaps  []check.Capability
	// expect is --expect; resolve turns it, or the file's expect =, into
	// expectation.
	expect      string
	expectation *check.Expectation
	interval    time.Duration
	// virtHost and bareMetal say what the host is for (acs_path, virt_host).
	virtHost, bareMetal bool
	golden              string // --golden: the snapshot --prometheus compares the fabric with (diff.go)
}

func (ro *reportOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&ro.failOn, "fail-on", "fail", "lowest status that makes the exit code non-zero: fail, or warn (exit 2)")
	f.BoolVar(&ro.quick, "quick", false, "sysfs, /proc and config space only: no NVML, no CUDA, no pci.ids names (for NHC's timeout)")
	f.StringArrayVar(&ro.checks, "check", nil, "run only the check `ID` (repeatable); see 'p2pcheck report --help'")
	f.BoolVar(&ro.probe, "probe", false, "copy a 64 MiB pattern between every GPU pair with peer access and verify it (needs CUDA)")
	f.StringVar(&ro.prometheus, "prometheus", "", "also write the results as a node_exporter textfile `FILE` (atomically)")
	f.StringVar(&ro.nfd, "nfd", "", "also write node-feature-discovery labels to `FILE` in features.d (atomically)")
	f.DurationVar(&ro.nfdTTL, "nfd-expiry", time.Hour, "how long the --nfd labels stay valid if p2pcheck stops refreshing them")
	f.IntVar(&ro.pid, "pid", 0, "judge the locked-memory limit and NCCL environment of process `PID` (a job's) instead of p2pcheck's own")
	f.StringVar(&ro.require, "require", "", "what the node is for, a comma-separated `LIST` of "+capabilityNames()+
		": a check fails the node only if it blocks one of them (default p2p,gdr)")
	f.StringVar(&ro.expect, "expect", "", "the devices the node must have at least, `LIST` of gpus=N,rdma-nics=N,nvme=N: fewer fails the node (default: not counted, but a required capability with no devices to judge is unknown)")
	f.StringVar(&ro.config, "config", "", "read settings (require = LIST, expect = LIST, aer-threshold = N) from `FILE` (default "+defaultConfig+" when present); flags win")
	f.Uint64Var(&ro.aerThreshold, "aer-threshold", check.DefaultAERThreshold, "correctable AER errors, new since the previous --prometheus file or since boot without one, that warn")
	f.DurationVar(&ro.interval, "interval", 0, "run the report every `DURATION` (e.g. 5m), rewriting --prometheus and --nfd, until SIGTERM or SIGINT")
	f.BoolVar(&ro.virtHost, "virt-host", false, "judge a host that passes devices to VMs: virt_host instead of acs_path's bare-metal rule (default: found from the ConnectX NICs' ATS)")
	f.BoolVar(&ro.bareMetal, "bare-metal", false, "judge bare metal even where the NICs' ATS says virtualization host")
	f.StringVar(&ro.golden, "golden", "", "with --prometheus, also count the fabric's differences from this golden snapshot `FILE` (see p2pcheck diff)")
}

// capabilityNames lists the capabilities --require takes.
func capabilityNames() string {
	var names []string
	for _, c := range check.Capabilities() {
		names = append(names, string(c))
	}
	return strings.Join(names, ", ")
}

// resolve reads the configuration file and settles the requirements and the
// AER threshold: a flag given on the command line (changed reports which) wins
// over the file.
func (ro *reportOptions) resolve(changed func(flag string) bool) error {
	if ro.virtHost && ro.bareMetal {
		return usageError("--virt-host and --bare-metal exclude each other")
	}
	path, explicit := defaultConfig, ro.config != ""
	if explicit {
		path = ro.config
	}
	c, err := readConfig(ro.global.reads, path, explicit)
	switch {
	case errors.Is(err, errConfig), explicit && errors.Is(err, fs.ErrNotExist):
		return usageError("--config: %v", err)
	case err != nil:
		return noEvalError(fmt.Errorf("--config: %w", err))
	}
	ro.requireCaps = c.require
	if changed("require") {
		req, err := check.ParseRequirements(ro.require)
		if err != nil {
			return usageError("--require: %v", err)
		}
		ro.requireCaps = req
	}
	ro.expectation = c.expect
	if changed("expect") {
		e, err := check.ParseExpectation(ro.expect)
		if err != nil {
			return usageError("--expect: %v", err)
		}
		ro.expectation = &e
	}
	if c.aerThreshold != nil && !changed("aer-threshold") {
		ro.aerThreshold = *c.aerThreshold
	}
	if ro.aerThreshold == 0 {
		return usageError("--aer-threshold must be positive")
	}
	return nil
}

func newReportCommand(ro *reportOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Check the node's readiness for GPUDirect P2P/RDMA and GDRCopy (the default command)",
		Long: `report runs the check catalogue in causal order (reachability, VM and confidential
computing policy, firmware: IOMMU, ACS, BAR1, then links, drivers, modules and runtime
settings) and ends with the one thing to fix first.

Checks, in the order they run:
` + catalogueHelp() + `
A check fails the node only if it blocks what the node is for (--require, or
"require =" in the configuration file; default p2p,gdr): otherwise it warns and says
which --require would make it fail. A check that applies but could not read a fact it
needs (ACS without root) is unknown, and says how to see it. inventory counts the GPUs,
RDMA NICs and NVMe controllers: fewer than --expect says fails the node; without
--expect, a required capability with no devices to judge (p2p on a node with one GPU,
gdr without an RDMA NIC) is unknown, and so is a run in which every check skipped: a
node is ready only when something was judged and passed.

Exit codes: 0 pass (warnings allowed), 1 a check failed, 2 warnings with
--fail-on=warn, 3 a check of a required capability is unknown, nothing was judged, or
the node could not be evaluated, 64 usage error. The JSON "overall" and "exit_code" fields always agree
with the exit code.`,
		Example: "  sudo p2pcheck\n  p2pcheck report --quick --format json\n  p2pcheck --check acs_path --check iommu_mode\n" +
			"  p2pcheck --prometheus /var/lib/node_exporter/textfile/p2pcheck.prom --nfd /etc/kubernetes/node-feature-discovery/features.d/p2pcheck",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return ro.run(cmd) },
	}
	ro.addFlags(cmd)
	return cmd
}

// catalogueHelp lists the checks with their titles for --help.
func catalogueHelp() string {
	var b strings.Builder
	for _, s := range check.Catalogue() {
		fmt.Fprintf(&b, "  %-24s %s\n", s.ID, s.Title)
	}
	return b.String()
}

func (ro *reportOptions) validate() error {
	switch ro.failOn {
	case "fail", "warn":
	default:
		return usageError("--fail-on must be fail or warn, not %q", ro.failOn)
	}
	for _, id := range ro.checks {
		if !slices.Contains(check.IDs(), id) {
			return usageError("--check: unknown check %q; valid checks: %s", id, strings.Join(check.IDs(), ", "))
		}
	}
	if ro.nfd != "" && ro.nfdTTL <= 0 {
		return usageError("--nfd-expiry must be positive")
	}
	if ro.quick && ro.probe {
		return usageError("--quick and --probe exclude each other")
	}
	if ro.interval != 0 && ro.interval < minInterval {
		return usageError("--interval must be at least %v (a run reads the whole machine and rewrites the fleet files), not %v", minInterval, ro.interval)
	}
	if ro.golden != "" && ro.prometheus == "" {
		return usageError("--golden counts drift in the --prometheus textfile: give --prometheus too (p2pcheck diff prints it)")
	}
	return ro.validatePID()
}

func (ro *reportOptions) run(cmd *cobra.Command) error {
	if err := ro.validate(); err != nil {
		return err
	}
	if err := ro.resolve(cmd.Flags().Changed); err != nil {
		return err
	}
	if ro.interval > 0 {
		return ro.every(cmd.Context(), ro.checks)
	}
	return ro.report(ro.checks)
}

// report loads the machine, runs the checks named by ids (all when empty) and
// writes every output asked for. Its error carries the exit code.
func (ro *reportOptions) report(ids []string) error {
	o := ro.global
	start := now()
	// NVML's initialisation takes tens of milliseconds in the driver: run it while
	// sysfs is read.
	gpus := ro.startNVML()
	// --quick is for health-check timeouts: device names from pci.ids cost a few
	// milliseconds and no check needs them.
	n, err := o.loadWith(node.Options{NoNames: ro.quick, NoGPU: ro.quick})
	if err != nil {
		var ee *cli.ExitError
		if errors.As(err, &ee) && ee.Code == exitNoEval {
			// The previous run's files must not stay in place looking current.
			if werr := ro.writeUnevaluated(start); werr != nil {
				fmt.Fprintln(o.stderr, "p2pcheck:", werr)
			}
		}
		return err
	}
	facts := check.NewFacts(n, ro.gather(n, gpus))
	results, err := check.Run(facts, ids)
	if err != nil {
		return usageError("%v", err)
	}
	rep := check.NewReport(facts, results, check.Meta{
		ToolVersion: version(),
		Hostname:    hostName(),
		Timestamp:   start,
		FailOnWarn:  ro.failOn == "warn",
		Require:     ro.requireCaps,
	})
	if o.format == "json" {
		err = render.ReportJSON(o.stdout, rep)
	} else {
		o.printWarnings(n)
		err = render.ReportText(o.stdout, rep, render.Style{Color: o.color()})
	}
	if err != nil {
		return err
	}
	if err := ro.writeFleetFiles(rep, now().Sub(start), n); err != nil {
		return err
	}
	if rep.ExitCode != 0 {
		return cli.Exit(rep.ExitCode, nil)
	}
	return nil
}

func hostName() string {
	h, err := hostname()
	if err != nil {
		return "unknown"
	}
	return h
}

// gather collects the facts beside the node: where it came from, NVML, the NCCL
// settings, the judged process and configured limits (processInputs) and the
// probe. It is the report's one place of I/O
// after loading the node.
func (ro *reportOptions) gather(n *node.Node, gpus func() (*gpu.Facts, error)) check.Inputs {
	o := ro.global
	in := check.Inputs{Source: ro.source(), Expect: ro.expectation, Require: ro.requireCaps}
	switch {
	case ro.virtHost:
		in.Use = provision.ModeVirtHost
	case ro.bareMetal:
		in.Use = provision.ModeBareMetal
	}
	f, err := gpus()
	switch {
	case n.GPU != nil: // the NVML facts a snapshot recorded
	case err != nil:
		in.NoNVML = err.Error()
	default:
		n.GPU = f
	}
	n.NameGPUs() // from NVML live, or from what a snapshot recorded
	if in.Source != check.Snapshot {
		if b, err := o.readUnder("etc/nccl.conf", kindNCCLConf); err == nil {
			in.NCCLConf = check.ParseNCCLConf("/etc/nccl.conf", b)
		} else if !errors.Is(err, fs.ErrNotExist) {
			n.Warnings = append(n.Warnings, fmt.Errorf("reading /etc/nccl.conf: %w", err))
		}
	}
	if in.Source == check.Live {
		in.GDRDrvAccess = gdrdrvAccess()
	}
	ro.processInputs(&in, n)
	if ro.probe {
		in.Probe = ro.runProbe(n, in.Source)
	}
	in.AER = check.AERPolicy{Threshold: ro.aerThreshold, Previous: ro.previousAER(n)}
	return in
}

// previousAER reads the AER totals of the previous run back from the
// --prometheus file it wrote, so that aer_errors judges their growth; nil when
// there is no such file. A file that cannot be read or parsed is a warning and
// the counts are judged since boot.
func (ro *reportOptions) previousAER(n *node.Node) map[pcie.Address]pcie.AERCounts {
	if ro.prometheus == "" {
		return nil
	}
	// Read as every named file is, before the writer refuses a target that is
	// not a regular file: a FIFO is refused here too, without blocking.
	b, err := hostfs.ReadNamed(ro.global.reads, ro.prometheus, kindTextfile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil {
		var prev map[pcie.Address]pcie.AERCounts
		if prev, err = render.PreviousAER(bytes.NewReader(b)); err == nil {
			return prev
		}
	}
	n.Warnings = append(n.Warnings, fmt.Errorf("reading the previous --prometheus file for AER counts: %w", err))
	return nil
}

// source says what the report describes.
func (ro *reportOptions) source() check.Source {
	switch {
	case ro.global.snapshot != "":
		return check.Snapshot
	case ro.global.root != "/":
		return check.Root
	}
	return check.Live
}

// startNVML starts asking NVML for the report's GPU facts where that makes sense.
func (ro *reportOptions) startNVML() func() (*gpu.Facts, error) {
	skip := ro.global.nvmlSkip()
	if ro.quick {
		skip = fmt.Errorf("%w: --quick", errNVMLSkipped)
	}
	return startNVML(skip, probeNVML)
}

// runProbe runs the data-integrity probe on the live machine.
func (ro *reportOptions) runProbe(n *node.Node, src check.Source) *check.ProbeReport {
	if src != check.Live {
		return &check.ProbeReport{Skipped: "the probe runs on the live machine only, not on a snapshot or --root"}
	}
	var gpus []*pcie.Device
	for _, d := range n.Interesting() {
		if d.IsGPU() {
			gpus = append(gpus, d)
		}
	}
	return probe.Run(gpus, probe.DefaultSize, probe.DefaultTimeout)
}

// writeFleetFiles writes the Prometheus textfile and the NFD features file when
// asked for, each atomically (writeFileAtomic).
func (ro *reportOptions) writeFleetFiles(rep check.Report, took time.Duration, n *node.Node) error {
	return ro.writeFleet(
		func() (*prometheus.Registry, error) {
			reg, err := render.PrometheusRegistry(rep, took)
			if err == nil {
				ro.fabricMetrics(reg, n)
			}
			return reg, err
		},
		func(w io.Writer) error { return render.NFDFeatures(w, rep, rep.Timestamp.Add(ro.nfdTTL)) })
}

// writeUnevaluated writes the fleet files of a run that could not read the
// machine, started at start: p2pcheck_up 0 with the run's time, and the NFD
// label ready=false.
func (ro *reportOptions) writeUnevaluated(start time.Time) error {
	start = start.UTC().Truncate(time.Second)
	run := render.Run{ExitCode: exitNoEval, Start: start, Duration: now().Sub(start), ToolVersion: version()}
	return ro.writeFleet(
		func() (*prometheus.Registry, error) { return render.PrometheusUnevaluated(run), nil },
		func(w io.Writer) error { return render.NFDUnevaluated(w, version(), start.Add(ro.nfdTTL)) })
}

// writeFleet writes the --prometheus file from the registry prom returns, every
// series labelled with the run's mode (render.WithMode), and the --nfd file
// with nfd, where asked for. Either failing is exit 3.
func (ro *reportOptions) writeFleet(prom func() (*prometheus.Registry, error), nfd func(io.Writer) error) error {
	if ro.prometheus != "" {
		reg, err := prom()
		if err == nil {
			g := render.WithMode(reg, render.Mode(ro.quick, ro.probe))
			err = writeFileAtomic(ro.prometheus, true, func(f *os.File) error { return writeTextfile(f, g) })
		}
		if err != nil {
			return noEvalError(fmt.Errorf("--prometheus: %w", err))
		}
	}
	if ro.nfd != "" {
		err := writeFileAtomic(ro.nfd, true, func(f *os.File) error { return nfd(f) })
		if err != nil {
			return noEvalError(fmt.Errorf("--nfd: %w", err))
		}
	}
	return nil
}

// writeTextfile writes the registry's metrics in the text format node_exporter's
// textfile collector reads (what prometheus.WriteToTextfile writes, through
// writeFileAtomic's checks instead of its own rename).
func writeTextfile(w io.Writer, g prometheus.Gatherer) error {
	mfs, err := g.Gather()
	if err != nil {
		return err
	}
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(w, mf); err != nil {
			return err
		}
	}
	return nil
}

// every runs the report now and then every ro.interval until ctx is cancelled
// or SIGTERM or SIGINT arrives, which ends it with exit 0 after the run in
// progress; a second signal takes the default action. A run that fails is
// reported on stderr and the next one goes ahead: a node that cannot be
// evaluated now may be later, and its files say so meanwhile.
func (ro *reportOptions) every(ctx context.Context, ids []string) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	context.AfterFunc(ctx, stop)
	t := time.NewTicker(ro.interval)
	defer t.Stop()
	for {
		// Each run has its own read budget.
		ro.global.reads = hostfs.NewMeter(hostfs.DefaultBudget.RunBytes)
		err := ro.report(ids)
		var ee *cli.ExitError
		switch {
		case errors.As(err, &ee) && ee.Code == exitUsage:
			return err
		case errors.As(err, &ee) && ee.Err == nil:
			// The report's own verdict: the output says it.
		case err != nil:
			fmt.Fprintln(ro.global.stderr, "p2pcheck:", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
