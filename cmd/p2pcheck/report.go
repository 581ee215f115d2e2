package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/check/probe"
	"github.com/p2pkit/p2pkit/internal/gpu"
	"github.com/p2pkit/p2pkit/internal/node"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/render"
)

// Seams for tests: the report's host name and time.
var (
	hostname = os.Hostname
	now      = time.Now
)

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
Exit codes: 0 pass (warnings allowed), 1 a check failed, 2 warnings with
--fail-on=warn, 3 a check could not be evaluated, 64 usage error. The JSON "overall"
and "exit_code" fields always agree with the exit code.`,
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
	return nil
}

func (ro *reportOptions) run(*cobra.Command) error {
	if err := ro.validate(); err != nil {
		return err
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
	if err := ro.writeFleetFiles(rep, now().Sub(start)); err != nil {
		return err
	}
	if rep.ExitCode != 0 {
		return &exitError{code: rep.ExitCode}
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
// settings, RLIMIT_MEMLOCK and the probe. It is the report's one place of I/O
// after loading the node.
func (ro *reportOptions) gather(n *node.Node, gpus func() (*gpu.Facts, error)) check.Inputs {
	o := ro.global
	in := check.Inputs{Source: ro.source()}
	f, err := gpus()
	switch {
	case n.GPU != nil: // the NVML facts a snapshot recorded
	case err != nil:
		in.NoNVML = err.Error()
	default:
		n.GPU = f
	}
	if in.Source != check.Snapshot {
		if b, err := readUnder(o.root, "etc/nccl.conf"); err == nil {
			in.NCCLConf = check.ParseNCCLConf("/etc/nccl.conf", b)
		} else if !errors.Is(err, fs.ErrNotExist) {
			n.Warnings = append(n.Warnings, fmt.Errorf("reading /etc/nccl.conf: %w", err))
		}
	}
	if in.Source == check.Live {
		in.NCCLEnv = map[string]string{}
		for _, kv := range os.Environ() {
			if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "NCCL_") {
				in.NCCLEnv[k] = v
			}
		}
		in.Memlock = memlock()
		in.GDRDrvAccess = gdrdrvAccess()
	}
	if ro.probe {
		in.Probe = ro.runProbe(n, in.Source)
	}
	return in
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

// readUnder reads name below root without leaving it.
func readUnder(root, name string) ([]byte, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.ReadFile(name)
}

// writeFleetFiles writes the Prometheus textfile and the NFD features file when
// asked for, each atomically (a temporary file in the same directory, renamed).
func (ro *reportOptions) writeFleetFiles(rep check.Report, took time.Duration) error {
	if ro.prometheus != "" {
		reg, err := render.PrometheusRegistry(rep, took)
		if err == nil {
			err = prometheus.WriteToTextfile(ro.prometheus, reg)
		}
		if err != nil {
			return noEvalError(fmt.Errorf("--prometheus: %w", err))
		}
	}
	if ro.nfd != "" {
		expiry := rep.Timestamp.Add(ro.nfdTTL)
		err := writeFileAtomic(ro.nfd, true, func(f *os.File) error { return render.NFDFeatures(f, rep, expiry) })
		if err != nil {
			return noEvalError(fmt.Errorf("--nfd: %w", err))
		}
	}
	return nil
}
