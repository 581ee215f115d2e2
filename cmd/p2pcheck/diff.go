package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/p2pkit/p2pkit/drift"
	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/internal/cli"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/promtext"
	"github.com/p2pkit/p2pkit/render"
	"github.com/p2pkit/p2pkit/snapshot"
)

type diffOptions struct {
	global     *globalOptions
	fleet      bool
	failOn     string
	prometheus string
	nfd        string
	nfdTTL     time.Duration
}

func newDiffCommand(o *globalOptions) *cobra.Command {
	do := &diffOptions{global: o}
	cmd := &cobra.Command{
		Use:   "diff GOLDEN [NODE] | diff --fleet DIR|FILE...",
		Short: "Compare the node with a golden snapshot, or group a fleet of snapshots by fabric signature",
		Long: `diff compares a machine with a golden one that should be identical: GOLDEN is a
snapshot (.tar.gz, from 'p2pcheck snapshot') or a directory holding a root; the
node is NODE, another snapshot or root, or else the machine --root or --snapshot
names (this machine by default). Devices are matched by their place in the tree,
the path from their root port as 'p2pcheck fix' names bridges (0000:15:01.0/0.0/1.0),
not by bus number, so a renumbering is not drift.

It reports, kind by kind: devices missing, added or moved (by role); link speed and
width and new downgrades; ACS Control; BAR and Resizable BAR sizes; the IOMMU mode,
domain types and group membership; NUMA placement; kernel, driver and module
versions and the IDs and revisions firmware shows; NVLink counts; every pair whose
kernel verdict, path class or NCCL transport changed; and every check of the node
report whose status changed. Serial numbers, UUIDs, host names and timestamps
never count.

--fleet reads many snapshots (every .tar.gz in DIR, or the FILEs), one at a time,
groups them by fabric signature, names the majority and lists, for each other
group, its differences from the majority.

--format text, json (schema/diff.v1.json) or dot (the golden's tree with what
changed marked; the single form only). --prometheus and --nfd write the outcome as
a node_exporter textfile and node-feature-discovery labels (single form).

Exit codes: 0 no drift, 1 drift that changes a verdict (or a device of interest
missing), 2 other drift with --fail-on=warn, 3 could not compare (a machine that
cannot be read, or a fact the golden records that the node does not show),
64 usage error. See docs/diff.md.`,
		Example: "  sudo p2pcheck diff /etc/p2pcheck/golden.tar.gz\n  p2pcheck diff golden.tar.gz node7.tar.gz --format json\n" +
			"  p2pcheck diff --fleet /srv/snapshots/\n  p2pcheck diff golden.tar.gz node7.tar.gz --format dot | dot -Tsvg > drift.svg",
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if o.format != "dot" {
				return o.validate()
			}
			o.format = "text"
			err := o.validate()
			o.format = "dot"
			return err
		},
		RunE: func(_ *cobra.Command, args []string) error { return do.run(args) },
	}
	f := cmd.Flags()
	f.BoolVar(&do.fleet, "fleet", false, "the arguments are a fleet: directories of snapshots, or snapshot files")
	f.StringVar(&do.failOn, "fail-on", "fail", "lowest drift that makes the exit code non-zero: fail (a verdict changed), or warn (any drift, exit 2)")
	f.StringVar(&do.prometheus, "prometheus", "", "also write the outcome as a node_exporter textfile `FILE` (atomically)")
	f.StringVar(&do.nfd, "nfd", "", "also write node-feature-discovery labels to `FILE` in features.d (atomically)")
	f.DurationVar(&do.nfdTTL, "nfd-expiry", time.Hour, "how long the --nfd labels stay valid")
	return cmd
}

func (do *diffOptions) validate(args []string) error {
	o := do.global
	switch {
	case do.failOn != "fail" && do.failOn != "warn":
		return usageError("--fail-on must be fail or warn, not %q", do.failOn)
	case do.fleet && len(args) == 0:
		return usageError("diff --fleet: name a directory of snapshots or snapshot files")
	case do.fleet && (do.prometheus != "" || do.nfd != ""):
		return usageError("diff --fleet: --prometheus and --nfd describe one node; use the single form")
	case do.fleet && o.format == "dot":
		return usageError("diff --fleet: --format dot draws one comparison; use the single form")
	case do.fleet && (o.snapshot != "" || o.root != "/"):
		return usageError("diff --fleet: the fleet is the arguments, not --root or --snapshot")
	case do.fleet:
		return nil
	case len(args) < 1 || len(args) > 2:
		return usageError("diff: want GOLDEN and at most one NODE (or --fleet)")
	case len(args) == 2 && (o.snapshot != "" || o.root != "/"):
		return usageError("diff: NODE and --root or --snapshot exclude each other")
	case do.nfd != "" && do.nfdTTL <= 0:
		return usageError("--nfd-expiry must be positive")
	}
	return nil
}

func (do *diffOptions) run(args []string) error {
	if err := do.validate(args); err != nil {
		return err
	}
	if do.fleet {
		return do.runFleet(args)
	}
	o := do.global
	opt := node.Options{NoNames: o.format != "dot", PCIIDs: o.pciIDs, Kernel: o.kernel}
	golden, err := loadInput(args[0], o.reads, opt)
	if err != nil {
		return err
	}
	nodeSide := o.source()
	var n *node.Node
	if len(args) == 2 {
		nodeSide = inputSource(args[1])
		n, err = loadInput(args[1], o.reads, opt)
	} else {
		gpus := startNVML(o.nvmlSkip(), gpu.Probe)
		n, err = o.loadWith(opt)
		if err == nil {
			attachNVML(n, gpus)
		}
	}
	if err != nil {
		return err
	}
	gs, ns := drift.Summarize(golden), drift.Summarize(n)
	rep := render.NewDiffReport(render.DiffSide{Source: inputSource(args[0]), Signature: gs.Signature().String()},
		render.DiffSide{Source: nodeSide, Signature: ns.Signature().String()}, drift.Compare(gs, ns), do.failOn == "warn")
	switch o.format {
	case "json":
		err = render.DiffJSON(o.stdout, rep)
	case "dot":
		o.printWarnings(golden)
		err = render.DiffDot(o.stdout, golden.Topology, golden.P2P(), golden.GPU, rep)
	default:
		o.printWarnings(golden)
		o.printWarnings(n)
		err = render.DiffText(o.stdout, rep)
	}
	if err != nil {
		return err
	}
	if err := do.writeFleetFiles(rep); err != nil {
		return err
	}
	if rep.ExitCode != 0 {
		return cli.Exit(rep.ExitCode, nil)
	}
	return nil
}

// inputSource names a GOLDEN or NODE argument.
func inputSource(path string) string {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return "root " + path
	}
	return "snapshot " + path
}

// snapshotKind is a snapshot file named on the command line: at most as many
// bytes as a snapshot may hold decompressed.
var snapshotKind = hostfs.Kind{Name: "snapshot", Limit: hostfs.DefaultBudget.Bytes}

// loadInput reads the machine at path, counting its bytes on m: a directory
// that stands for /, or a snapshot file (hostfs.OpenNamed: a regular file,
// refused without blocking otherwise). Failing to read it means nothing can be
// compared (exit 3).
func loadInput(path string, m *hostfs.Meter, opt node.Options) (*node.Node, error) {
	root, err := openInput(path, m)
	if err != nil {
		return nil, noEvalError(err)
	}
	defer root.Close()
	n, err := node.Load(root, opt)
	switch {
	case errors.Is(err, node.ErrBadKernelVersion):
		return nil, usageError("--kernel-version: %v", err)
	case err != nil:
		return nil, noEvalError(fmt.Errorf("reading %s: %w", path, err))
	}
	return n, nil
}

func openInput(path string, m *hostfs.Meter) (hostfs.Root, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		root, err := hostfs.Open(path)
		if err != nil {
			return hostfs.Root{}, err
		}
		hugePagesForTree(root)
		return root.WithMeter(m), nil
	}
	hugePagesForArchive(path)
	f, err := hostfs.OpenNamed(m, path, snapshotKind)
	if err != nil {
		return hostfs.Root{}, err
	}
	defer f.Close()
	root, err := snapshot.Read(bufio.NewReader(f))
	if err != nil {
		return hostfs.Root{}, fmt.Errorf("%w (in %s)", err, path)
	}
	return root.WithMeter(m), nil
}

// writeFleetFiles writes the --prometheus textfile and the --nfd labels of a
// comparison, where asked for.
func (do *diffOptions) writeFleetFiles(rep render.DiffReport) error {
	if do.prometheus != "" {
		reg := new(promtext.Registry)
		render.DiffMetrics(reg, rep, now())
		err := writeFileAtomic(do.prometheus, true, func(f *os.File) error { return writeTextfile(f, reg) })
		if err != nil {
			return noEvalError(fmt.Errorf("--prometheus: %w", err))
		}
	}
	if do.nfd != "" {
		err := writeFileAtomic(do.nfd, true, func(f *os.File) error { return render.DiffNFD(f, rep, version(), now().Add(do.nfdTTL)) })
		if err != nil {
			return noEvalError(fmt.Errorf("--nfd: %w", err))
		}
	}
	return nil
}

// maxFleet bounds the snapshots of one --fleet run.
const maxFleet = 100_000

// fleetSource is a fleet of snapshot files and roots, loaded one at a time.
type fleetSource struct {
	paths, names []string
}

func (f *fleetSource) Len() int          { return len(f.paths) }
func (f *fleetSource) Name(i int) string { return f.names[i] }

// Load reads machine i within a budget of its own: the run's budget bounds one
// machine, and a fleet of 10,000 is 10,000 runs' worth.
func (f *fleetSource) Load(i int, fn func(*drift.Summary) error) error {
	n, err := loadInput(f.paths[i], hostfs.NewMeter(hostfs.DefaultBudget.RunBytes), node.Options{NoNames: true})
	if err != nil {
		var ee *cli.ExitError
		if errors.As(err, &ee) && ee.Err != nil {
			return ee.Err
		}
		return err
	}
	return fn(drift.Summarize(n))
}

// listFleet finds the machines of a fleet: each argument is a snapshot file, a
// root (a directory with sys/ in it), or a directory whose *.tar.gz files and
// roots are taken, in name order.
func listFleet(args []string) (*fleetSource, error) {
	src := &fleetSource{}
	add := func(path string) error {
		if len(src.paths) >= maxFleet {
			return fmt.Errorf("more than %d machines", maxFleet)
		}
		src.paths = append(src.paths, path)
		return nil
	}
	for _, a := range args {
		fi, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() || isRoot(a) {
			if err := add(a); err != nil {
				return nil, err
			}
			continue
		}
		ents, err := os.ReadDir(a)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			p := filepath.Join(a, e.Name())
			if (strings.HasSuffix(e.Name(), ".tar.gz") && !e.IsDir()) || (e.IsDir() && isRoot(p)) {
				if err := add(p); err != nil {
					return nil, err
				}
			}
		}
	}
	src.names = fleetNames(src.paths)
	return src, nil
}

func isRoot(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, "sys"))
	return err == nil && fi.IsDir()
}

// fleetNames names each machine by its file name less .tar.gz, or by its path
// where two file names are the same.
func fleetNames(paths []string) []string {
	names := make([]string, len(paths))
	count := map[string]int{}
	for i, p := range paths {
		names[i] = strings.TrimSuffix(filepath.Base(p), ".tar.gz")
		count[names[i]]++
	}
	for i, p := range paths {
		if count[names[i]] > 1 {
			names[i] = p
		}
	}
	return names
}

func (do *diffOptions) runFleet(args []string) error {
	o := do.global
	src, err := listFleet(args)
	if err != nil {
		return noEvalError(fmt.Errorf("diff --fleet: %w", err))
	}
	fr := drift.Fleet(src)
	rep := render.NewFleetReport(fr, src.Len(), src.Name, do.failOn == "warn")
	if o.format == "json" {
		err = render.FleetJSON(o.stdout, rep)
	} else {
		err = render.FleetText(o.stdout, rep)
	}
	if err != nil {
		return err
	}
	if rep.ExitCode != 0 {
		return cli.Exit(rep.ExitCode, nil)
	}
	return nil
}

// fabricMetrics adds the node's fabric signature to the report's textfile and,
// with --golden, its differences from the golden snapshot. A golden file that
// cannot be read is a warning and the drift outcome "could not compare": the
// report itself evaluated the node.
func (ro *reportOptions) fabricMetrics(reg *promtext.Registry, n *node.Node) {
	s := drift.Summarize(n)
	if ro.golden == "" {
		render.FabricMetrics(reg, s.Signature().String(), nil)
		return
	}
	side := render.DiffSide{Source: ro.global.source(), Signature: s.Signature().String()}
	var rep render.DiffReport
	g, err := loadInput(ro.golden, ro.global.reads, node.Options{NoNames: true})
	if err != nil {
		fmt.Fprintln(ro.global.stderr, "p2pcheck: warning: --golden:", render.Escape(err.Error()))
		rep = render.NewDiffReport(render.DiffSide{Source: inputSource(ro.golden)}, side, drift.Result{}, false)
		rep.Outcome = drift.OutcomeUnknown
	} else {
		gs := drift.Summarize(g)
		rep = render.NewDiffReport(render.DiffSide{Source: inputSource(ro.golden), Signature: gs.Signature().String()}, side, drift.Compare(gs, s), false)
	}
	render.FabricMetrics(reg, s.Signature().String(), &rep)
}
