package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/check/probe"
	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/internal/cli"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/promtext"
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
	// quiet (--quiet) prints the verdict only, and with --interval only when it
	// changed (lastVerdict is the previous run's); progress (--progress) reports
	// the probe's progress on stderr even when stderr is not a terminal.
	quiet       bool
	progress    bool
	lastVerdict string
	// printed says whether this run's report reached standard output.
	printed bool
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
	f.BoolVarP(&ro.quiet, "quiet", "q", false, "print only the verdict (the overall and fix-first lines; JSON whole), and with --interval only when a status changed; no warnings")
	f.BoolVar(&ro.progress, "progress", false, "report --probe's progress on stderr even when stderr is not a terminal")
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
		return ro.jsonUnevaluated(err, now())
	}
	if ro.interval > 0 {
		return ro.every(cmd.Context(), ro.checks)
	}
	return ro.report(ro.checks)
}

// jsonUnevaluated returns err, and first, when err means p2pcheck could not
// evaluate the node (exit 3 with a message) and --format json printed no
// report, prints the report of a run that could not evaluate: overall
// "error", exit_code 3 and the error (schema/report.v1.json), so that a
// program reading standard output gets JSON on every exit code but usage
// errors.
func (ro *reportOptions) jsonUnevaluated(err error, start time.Time) error {
	var ee *cli.ExitError
	if ro.global.format != "json" || ro.printed || !errors.As(err, &ee) || ee.Code != exitNoEval || ee.Err == nil {
		return err
	}
	req := ro.requireCaps
	if len(req) == 0 {
		req = slices.Clone(check.DefaultRequirements)
	}
	if werr := writeUnevaluatedJSON(ro.global.stdout, unevaluatedReport{
		SchemaVersion: check.SchemaVersion,
		ToolVersion:   version(),
		Hostname:      hostName(),
		Timestamp:     start.UTC().Truncate(time.Second),
		Overall:       check.Error,
		ExitCode:      exitNoEval,
		Requirements:  req,
		Error:         ee.Err.Error(),
	}); werr != nil {
		return noEvalError(fmt.Errorf("%w; writing the JSON report: %w", ee.Err, werr))
	}
	return err
}

// report loads the machine, runs the checks named by ids (all when empty) and
// writes every output asked for. Its error carries the exit code.
func (ro *reportOptions) report(ids []string) error {
	start := now()
	ro.printed = false
	err := ro.reportAt(start, ids)
	if !ro.printed {
		// No verdict: with --quiet, the next one is news whatever it is.
		ro.lastVerdict = ""
	}
	return ro.jsonUnevaluated(err, start)
}

// reportAt is report's run, started at start; it sets ro.printed once the
// report (or, with --quiet, the absence of news) is written.
func (ro *reportOptions) reportAt(start time.Time, ids []string) error {
	o := ro.global
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
	if err := ro.print(rep, n); err != nil {
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

// print writes the report to standard output: whole, or with --quiet the
// verdict alone, and with --quiet and --interval nothing when no status
// changed since the previous run.
func (ro *reportOptions) print(rep check.Report, n *node.Node) error {
	o := ro.global
	if ro.quiet {
		v := verdictKey(rep)
		changed := v != ro.lastVerdict
		ro.lastVerdict = v
		if !changed {
			ro.printed = true
			return nil
		}
	} else if o.format == "text" {
		o.printWarnings(n)
	}
	ro.printed = true
	if o.format == "json" {
		return render.ReportJSON(o.stdout, rep)
	}
	style := render.Style{Color: o.color()}
	if !ro.quiet {
		return render.ReportText(o.stdout, rep, style)
	}
	var buf bytes.Buffer
	if err := render.ReportText(&buf, rep, style); err != nil {
		return err
	}
	_, err := o.stdout.Write(verdictLines(buf.Bytes()))
	return err
}

// verdictKey is what --quiet compares between runs: the overall status, the
// exit code and every check's and finding's status.
func verdictKey(rep check.Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d\n", rep.Overall, rep.ExitCode)
	for _, r := range rep.Checks {
		fmt.Fprintf(&b, "%s %s\n", r.ID, r.Status)
		for _, f := range r.Findings {
			fmt.Fprintf(&b, "%s %s %s\n", r.ID, f.Subject, f.Status)
		}
	}
	return b.String()
}

var ansiEscape = regexp.MustCompile("\x1b\\[[0-9;]*m")

// verdictLines is the verdict at the end of a text report: from its last
// line that starts with "overall:" (colour aside) to the end.
func verdictLines(text []byte) []byte {
	lines := bytes.SplitAfter(text, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		if bytes.HasPrefix(ansiEscape.ReplaceAll(lines[i], nil), []byte("overall:")) {
			return bytes.Join(lines[i:], nil)
		}
	}
	return text
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
		if ro.progress || isTerminal(ro.global.stderr) {
			fmt.Fprintln(ro.global.stderr, "p2pcheck: probe: not run (a snapshot or --root)")
		}
		return &check.ProbeReport{Skipped: "the probe runs on the live machine only, not on a snapshot or --root"}
	}
	var gpus []*pcie.Device
	for _, d := range n.Interesting() {
		if d.IsGPU() {
			gpus = append(gpus, d)
		}
	}
	pairs := len(gpus) * (len(gpus) - 1)
	progress := ro.progress || isTerminal(ro.global.stderr)
	if progress {
		fmt.Fprintf(ro.global.stderr, "p2pcheck: probe: copying %d MiB between %d GPU pairs (at most %v)...\n",
			probe.DefaultSize>>20, pairs, probe.DefaultTimeout)
	}
	start := now()
	rep := probe.Run(gpus, probe.DefaultSize, probe.DefaultTimeout)
	if progress {
		fmt.Fprintf(ro.global.stderr, "p2pcheck: probe: done in %v\n", now().Sub(start).Round(time.Millisecond))
	}
	return rep
}

// writeFleetFiles writes the Prometheus textfile and the NFD features file when
// asked for, each atomically (writeFileAtomic).
func (ro *reportOptions) writeFleetFiles(rep check.Report, took time.Duration, n *node.Node) error {
	return ro.writeFleet(
		func() *promtext.Registry {
			reg := render.PrometheusRegistry(rep, took)
			ro.fabricMetrics(reg, n)
			return reg
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
		func() *promtext.Registry { return render.PrometheusUnevaluated(run) },
		func(w io.Writer) error { return render.NFDUnevaluated(w, version(), start.Add(ro.nfdTTL)) })
}

// writeFleet writes the --prometheus file from the registry prom returns, every
// series labelled with the run's mode (render.ModeLabel), and the --nfd file
// with nfd, where asked for. Either failing is exit 3.
func (ro *reportOptions) writeFleet(prom func() *promtext.Registry, nfd func(io.Writer) error) error {
	if ro.prometheus != "" {
		reg, mode := prom(), render.ModeLabel(render.Mode(ro.quick, ro.probe))
		err := writeFileAtomic(ro.prometheus, true, func(f *os.File) error { return writeTextfile(f, reg, mode) })
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

// writeTextfile writes the registry's metrics, with the extra labels on every
// series, in the text format node_exporter's textfile collector reads, through a
// buffer: the file is written by writeFileAtomic, which renames it in place.
func writeTextfile(f *os.File, reg *promtext.Registry, extra ...promtext.Label) error {
	w := bufio.NewWriter(f)
	if err := reg.Write(w, extra...); err != nil {
		return err
	}
	return w.Flush()
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
