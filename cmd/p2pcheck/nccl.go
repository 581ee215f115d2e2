package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/nccl"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/render"
)

type ncclOptions struct {
	global    *globalOptions
	assume    []string
	version   string
	lib       string
	topoXML   string
	topoFile  string
	netPlugin string
	logs      []string
}

func newNCCLCommand(o *globalOptions) *cobra.Command {
	no := &ncclOptions{global: o}
	cmd := &cobra.Command{
		Use:   "nccl",
		Short: "Predict how NCCL will move data here, or explain an NCCL log: P2P, SHM, network, GPUDirect RDMA, GDRCopy",
		Long: `nccl predicts what NCCL will decide on this node, with the reason, the NCCL rule
(function, file and line of the release) and the NCCL setting that would change it:

  - for each pair of GPUs, the transport: P2P over NVLink or PCIe (or through the
    copy engine with NCCL_P2P_USE_CUDA_MEMCPY=1), SHM through host memory, or the
    network, with the label NCCL prints in its "via ..." INFO lines;
  - for each GPU and network device, whether NCCL uses GPUDirect RDMA (the path
    type against NCCL_NET_GDR_LEVEL, the NIC's support through nvidia-peermem or
    DMA-BUF);
  - whether NCCL uses GDRCopy (NCCL_GDRCOPY_ENABLE, gdrdrv).

It rebuilds NCCL's topology from sysfs and NVML and computes NCCL's paths; the path
lines it prints are those NCCL prints with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=GRAPH.
NCCL_* settings come from the environment, NCCL_CONF_FILE or ~/.nccl.conf, and
/etc/nccl.conf, with NCCL's precedence; --assume NCCL_X=Y asks "what if". The NCCL
release whose defaults apply is read from libnccl.so (--nccl-lib, or the usual
places), else --nccl-version, else 2.28.9. A snapshot records the environment's
NCCL_* variables, the interfaces, the libnccl.so found and the configuration
files, so that nccl on it answers as it did live. A decision that rests on a
fact that could not be read says so in the verdict: "P2P/CUMEM if NVLink between
the GPUs (unknown: NVML not asked), else SHM/direct/direct".

--topo-xml FILE writes NCCL's topology XML, the file NCCL_TOPO_DUMP_FILE writes
and NCCL_TOPO_FILE reads ("-" for stdout).

--topo-file FILE takes such an XML, NCCL's own dump for one, as the machine (with
--assume for the job's settings, --nccl-version, and --net-plugin as NCCL's "Using
network" line names the plugin).

--log FILE (repeatable, "-" for standard input) explains NCCL_DEBUG=INFO logs of
one or more ranks: the version, the settings NCCL printed, every channel's
transport and every GPUDirect RDMA and GDRCopy line, each with the rule that made
it and the setting that would change it; with --topo-file, or with the topology
the log printed (NCCL_DEBUG_SUBSYS=GRAPH), it compares NCCL's decisions with the
prediction and names every disagreement. Lines it does not know are listed as
not understood.

Exit codes: 0 the prediction or explanation was made (whatever it says), 3
p2pcheck could not evaluate, 64 usage error. See docs/nccl.md.`,
		Example: "  p2pcheck nccl\n  p2pcheck nccl --assume NCCL_P2P_DISABLE=1\n  p2pcheck nccl --topo-xml topo.xml\n" +
			"  p2pcheck nccl --snapshot node.tar.gz --nccl-version 2.28.9 --format json\n" +
			"  p2pcheck nccl --topo-file nccl-topo.xml --net-plugin IB --assume NCCL_P2P_LEVEL=SYS\n" +
			"  p2pcheck nccl --log rank0.log --log rank1.log --topo-file nccl-topo.xml",
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error { return no.run() },
	}
	f := cmd.Flags()
	f.StringArrayVar(&no.assume, "assume", nil, "what if `NCCL_X=Y` were set (repeatable; wins over the environment and config files)")
	f.StringVar(&no.version, "nccl-version", "", "apply the defaults of this NCCL `X.Y.Z` (default: read from libnccl.so, else 2.28.9)")
	f.StringVar(&no.lib, "nccl-lib", "", "read the NCCL version from this libnccl.so `FILE`")
	f.StringVar(&no.topoXML, "topo-xml", "", "write NCCL's topology XML to `FILE` (\"-\": stdout) instead of the prediction")
	f.StringVar(&no.topoFile, "topo-file", "", "take NCCL's topology XML `FILE` (NCCL_TOPO_DUMP_FILE's) as the machine")
	f.StringVar(&no.netPlugin, "net-plugin", "", "with --topo-file: the network plugin as NCCL names it (`NAME`: IB, Socket, ...)")
	f.StringArrayVar(&no.logs, "log", nil, "explain this NCCL_DEBUG=INFO log `FILE` (repeatable, \"-\": stdin)")
	return cmd
}

func (no *ncclOptions) run() error {
	assume := map[string]string{}
	for _, a := range no.assume {
		k, v, ok := strings.Cut(a, "=")
		if !ok || !strings.HasPrefix(k, "NCCL_") {
			return usageError("--assume wants NCCL_NAME=value, not %q", a)
		}
		assume[k] = v
	}
	var ver nccl.Version
	verSrc := ""
	if no.version != "" {
		v, err := nccl.ParseVersion(no.version)
		if err != nil {
			return usageError("--nccl-version: %v", err)
		}
		ver, verSrc = v, "--nccl-version"
	}
	switch {
	case no.topoXML != "" && (no.topoFile != "" || len(no.logs) > 0):
		return usageError("--topo-xml writes this machine's topology; it does not go with --topo-file or --log")
	case no.netPlugin != "" && no.topoFile == "":
		return usageError("--net-plugin goes with --topo-file")
	case len(no.logs) > 0:
		return no.runLog(assume, ver, verSrc)
	case no.topoFile != "":
		return no.runTopoFile(assume, ver, verSrc)
	}
	return no.runMachine(assume, ver, verSrc)
}

// runMachine predicts for the machine the flags name: live, a --root tree or a
// snapshot, through the same reads.
func (no *ncclOptions) runMachine(assume map[string]string, ver nccl.Version, verSrc string) error {
	o := no.global
	gpus := startNVML(o.nvmlSkip(), gpu.Probe)
	n, err := o.loadWith(nodeOptions())
	if err != nil {
		return err
	}
	attachNVML(n, gpus)
	in, topo, err := no.machineInput(n, assume, ver, verSrc)
	if err != nil {
		return err
	}
	if no.topoXML != "" {
		o.printWarnings(n)
		return no.writeTopoXML(topo)
	}
	r, err := nccl.Predict(in)
	if err != nil {
		return noEvalError(err)
	}
	if o.format != "json" {
		o.printWarnings(n)
	}
	return o.writeNCCLReport(r)
}

// machineInput gathers what NCCL would see on the machine: the node, the host
// facts (live or recorded), the configuration files, interfaces and RDMA rates
// below the machine's root.
func (no *ncclOptions) machineInput(n *node.Node, assume map[string]string, ver nccl.Version, verSrc string) (nccl.Input, *nccl.Node, error) {
	o := no.global
	root, err := o.openRoot()
	if err != nil {
		return nccl.Input{}, nil, err
	}
	defer root.Close()
	host, recorded, err := o.ncclHost(root, no.lib)
	if err != nil {
		return nccl.Input{}, nil, noEvalError(err)
	}
	merged := maps.Clone(host.Env)
	maps.Copy(merged, assume)
	set := nccl.ResolveSettings(assume, host.Env, o.ncclConfFiles(root, nccl.ConfPaths(merged, host.Home)))
	lib := host.Lib
	if no.lib != "" && !o.ncclLive() {
		lib = nil
		if v, src, others := o.findLibVersion(no.lib); src != "" {
			lib, recorded = &nccl.Lib{Version: v.String(), Path: src, Others: others}, false
		}
	}
	var others []string
	if verSrc == "" && lib != nil {
		if v, err := nccl.ParseVersion(lib.Version); err == nil {
			ver, verSrc, others = v, lib.Path, lib.Others
			if recorded {
				verSrc += ", as " + o.source() + " recorded it"
			}
		}
	}
	if verSrc == "" {
		ver, verSrc = nccl.DefaultVersion, "default (no libnccl.so found; --nccl-version to choose)"
	}
	m := nccl.FromNode(n, ncclInterfaces(root, host.Interfaces))
	m.RDMARates = ncclRDMARates(root)
	in, topo := m.Input(set, ver, verSrc)
	in.Notes = append(in.Notes, others...)
	return in, topo, nil
}

// runTopoFile predicts for the machine an NCCL topology XML describes.
func (no *ncclOptions) runTopoFile(assume map[string]string, ver nccl.Version, verSrc string) error {
	root, err := no.global.readTopoFile(no.topoFile)
	if err != nil {
		return err
	}
	if verSrc == "" {
		ver, verSrc = nccl.DefaultVersion, "default (--nccl-version to choose)"
	}
	in := nccl.FileInput(root, no.netPlugin, nccl.ResolveSettings(assume, nil, nil), ver, verSrc)
	in.Notes = append(in.Notes, "the machine is "+no.topoFile+": only --assume gives NCCL's settings, and NVML's P2P status is not in the file")
	r, err := nccl.Predict(in)
	if err != nil {
		return noEvalError(fmt.Errorf("%s: %w", no.topoFile, err))
	}
	return no.global.writeNCCLReport(r)
}

// readTopoFile reads and parses an NCCL topology XML a user named.
func (o *globalOptions) readTopoFile(name string) (*nccl.Node, error) {
	f, err := o.openInput(name, kindTopoFile)
	if err != nil {
		return nil, noEvalError(err)
	}
	defer f.Close()
	root, err := nccl.ParseXML(f)
	if err != nil {
		return nil, noEvalError(fmt.Errorf("%s: %w", name, err))
	}
	return root, nil
}

// writeNCCLReport writes the prediction in the output format.
func (o *globalOptions) writeNCCLReport(r *nccl.Report) error {
	if o.format == "json" {
		return r.WriteJSON(o.stdout)
	}
	w := &lineEscaper{w: o.stdout}
	if err := r.WriteText(w); err != nil {
		return err
	}
	return w.Close()
}

// lineEscaper writes text line by line with non-printing runes escaped
// (render.Escape), so that nothing a machine or a log holds reaches a terminal raw.
type lineEscaper struct {
	w    io.Writer
	part []byte
}

func (l *lineEscaper) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.part = append(l.part, p...)
			break
		}
		l.part = append(l.part, p[:i]...)
		if _, err := io.WriteString(l.w, render.Escape(string(l.part))+"\n"); err != nil {
			return 0, err
		}
		l.part, p = l.part[:0], p[i+1:]
	}
	return n, nil
}

// Close writes what is left of the last line.
func (l *lineEscaper) Close() error {
	if len(l.part) == 0 {
		return nil
	}
	_, err := io.WriteString(l.w, render.Escape(string(l.part)))
	l.part = l.part[:0]
	return err
}

// writeTopoXML writes NCCL's topology XML to --topo-xml: standard output for
// "-", else the file, through the one writer of outputs (atomic, never through a
// link, never a truncated or empty target).
func (no *ncclOptions) writeTopoXML(topo *nccl.Node) error {
	if no.topoXML == "-" {
		return nccl.WriteXML(no.global.stdout, topo)
	}
	if err := writeFileAtomic(no.topoXML, true, func(f *os.File) error { return nccl.WriteXML(f, topo) }); err != nil {
		return noEvalError(err)
	}
	return nil
}

// libDirs are where libnccl.so is looked for, relative to the root, in order: the
// pip package PyTorch and JAX bring (nvidia-nccl-cu*) in system and virtual
// environment site-packages first, since jobs load that one, then the system's
// and CUDA's library directories.
var libDirs = []string{
	"usr/local/lib/python3*/dist-packages/nvidia/nccl/lib", "usr/local/lib/python3*/site-packages/nvidia/nccl/lib",
	"usr/lib/python3*/dist-packages/nvidia/nccl/lib", "opt/*/lib/python3*/site-packages/nvidia/nccl/lib",
	"opt/*/*/lib/python3*/site-packages/nvidia/nccl/lib", "root/.local/lib/python3*/site-packages/nvidia/nccl/lib",
	"usr/lib/x86_64-linux-gnu", "usr/lib/aarch64-linux-gnu", "usr/lib64", "usr/lib", "usr/local/lib", "usr/local/cuda/lib64",
}

// findLibVersion reads NCCL's version banner from libnccl.so: the file --nccl-lib
// names, else the first found in $VIRTUAL_ENV, LD_LIBRARY_PATH (live only) and
// libDirs below the root. others names the other versions found, which a job may
// load instead, and the candidates that could not be read. Every candidate is
// read through hostfs (confined to the root, regular files only, at most
// kindLibNCCL's limit, on the run's budget); names of one file are read once.
func (o *globalOptions) findLibVersion(lib string) (v nccl.Version, src string, others []string) {
	if lib != "" {
		f, err := hostfs.OpenNamed(o.reads, lib, kindLibNCCL)
		if err != nil {
			return v, "", []string{fmt.Sprintf("--nccl-lib: %v", err)}
		}
		defer f.Close()
		found, ok, err := nccl.FindVersion(f)
		switch {
		case err != nil:
			return v, "", []string{fmt.Sprintf("--nccl-lib: %v", err)}
		case !ok:
			return v, "", []string{fmt.Sprintf("--nccl-lib: no NCCL version banner in %s", lib)}
		}
		return found, lib, nil
	}
	r, err := o.openRun()
	if err != nil {
		return v, "", []string{fmt.Sprintf("libnccl.so not looked for: %v", err)}
	}
	defer r.Close()
	r = r.WithMeter(o.reads.Sub(maxLibSearch))
	for _, c := range o.libCandidates(r) {
		found, ok, err := libVersion(r, c)
		switch {
		case errors.Is(err, hostfs.ErrBudget):
			return v, src, append(others, fmt.Sprintf("the search for libnccl.so stopped: %v", err))
		case err != nil:
			others = append(others, fmt.Sprintf("left out %s: %v", "/"+c, err))
		case !ok:
		case src == "":
			v, src = found, "/"+c
		case found != v:
			others = append(others, fmt.Sprintf("another NCCL, %s, is installed at /%s: a job that loads it follows its defaults (--nccl-lib or --nccl-version to choose)", found, c))
		}
	}
	return v, src, others
}

// libCandidates lists the libnccl.so* files below r in search order, each file
// once however many names (links) it has.
func (o *globalOptions) libCandidates(r hostfs.Root) []string {
	var dirs []string
	if o.root == "/" {
		if v := os.Getenv("VIRTUAL_ENV"); filepath.IsAbs(v) {
			dirs = append(dirs, strings.TrimPrefix(filepath.Join(v, "lib/python3*/site-packages/nvidia/nccl/lib"), "/"))
		}
		for _, d := range filepath.SplitList(os.Getenv("LD_LIBRARY_PATH")) {
			if filepath.IsAbs(d) {
				dirs = append(dirs, strings.TrimPrefix(filepath.Clean(d), "/"))
			}
		}
	}
	dirs = append(dirs, libDirs...)
	var cands []string
	seen := map[hostfs.FileID]bool{}
	for _, d := range dirs {
		m, _ := r.Glob(path.Join(d, "libnccl.so*"), maxDropIns)
		for _, f := range m {
			if id, err := r.FileID(f); err == nil && !seen[id] {
				seen[id] = true
				cands = append(cands, f)
			}
		}
	}
	return cands
}

// libVersion scans the library name below r for NCCL's version banner.
func libVersion(r hostfs.Root, name string) (nccl.Version, bool, error) {
	f, err := r.OpenKind(name, kindLibNCCL)
	if err != nil {
		return nccl.Version{}, false, err
	}
	defer f.Close()
	return nccl.FindVersion(f)
}
