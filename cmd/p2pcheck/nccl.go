package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/nccl"
	"github.com/p2pkit/p2pkit/render"
)

type ncclOptions struct {
	global  *globalOptions
	assume  []string
	version string
	lib     string
	topoXML string
}

func newNCCLCommand(o *globalOptions) *cobra.Command {
	no := &ncclOptions{global: o}
	cmd := &cobra.Command{
		Use:   "nccl",
		Short: "Predict how NCCL will move data here: P2P, SHM, network, GPUDirect RDMA, GDRCopy",
		Long: `nccl predicts what NCCL will decide on this node, with the reason and the NCCL
setting that would change it:

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
places), else --nccl-version, else 2.28.9.

--topo-xml FILE writes NCCL's topology XML, the file NCCL_TOPO_DUMP_FILE writes
and NCCL_TOPO_FILE reads ("-" for stdout).

Exit codes: 0 the prediction was made (whatever it says), 3 p2pcheck could not
evaluate, 64 usage error. See docs/nccl.md.`,
		Example: "  p2pcheck nccl\n  p2pcheck nccl --assume NCCL_P2P_DISABLE=1\n  p2pcheck nccl --topo-xml topo.xml\n  p2pcheck nccl --snapshot node.tar.gz --nccl-version 2.28.9 --format json",
		Args:    noArgs,
		RunE:    func(*cobra.Command, []string) error { return no.run() },
	}
	f := cmd.Flags()
	f.StringArrayVar(&no.assume, "assume", nil, "what if `NCCL_X=Y` were set (repeatable; wins over the environment and config files)")
	f.StringVar(&no.version, "nccl-version", "", "apply the defaults of this NCCL `X.Y.Z` (default: read from libnccl.so, else 2.28.9)")
	f.StringVar(&no.lib, "nccl-lib", "", "read the NCCL version from this libnccl.so `FILE`")
	f.StringVar(&no.topoXML, "topo-xml", "", "write NCCL's topology XML to `FILE` (\"-\": stdout) instead of the prediction")
	return cmd
}

func (no *ncclOptions) run() error {
	o := no.global
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
	gpus := startNVML(o.nvmlSkip(), gpu.Probe)
	n, err := o.loadWith(nodeOptions())
	if err != nil {
		return err
	}
	attachNVML(n, gpus)
	live := o.snapshot == ""
	env := map[string]string{}
	var ifaces []nccl.Interface
	if live && o.root == "/" {
		for _, kv := range os.Environ() {
			if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "NCCL_") {
				env[k] = v
			}
		}
		ifaces = liveInterfaces()
	}
	var files []nccl.ConfFile
	if live {
		home, _ := os.UserHomeDir()
		merged := map[string]string{}
		for k, v := range env {
			merged[k] = v
		}
		for k, v := range assume {
			merged[k] = v
		}
		for _, p := range nccl.ConfPaths(merged, home) {
			if b, err := o.readNCCLConf(p); err == nil {
				files = append(files, nccl.ConfFile{Path: p, Data: b})
			}
		}
	}
	set := nccl.ResolveSettings(assume, env, files)
	var others []string
	if verSrc == "" && live {
		ver, verSrc, others = o.findLibVersion(no.lib)
	}
	if verSrc == "" {
		ver, verSrc = nccl.DefaultVersion, "default (no libnccl.so found; --nccl-version to choose)"
	}
	m := nccl.FromNode(n, ifaces)
	if live {
		m.RDMARates = rdmaRates(o.root)
	}
	in, topo := m.Input(set, ver, verSrc)
	in.Notes = append(in.Notes, others...)
	if no.topoXML != "" {
		o.printWarnings(n)
		return no.writeTopoXML(topo)
	}
	r, err := nccl.Predict(in)
	if err != nil {
		return noEvalError(err)
	}
	if o.format == "json" {
		enc := json.NewEncoder(o.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	o.printWarnings(n)
	_, err = fmt.Fprint(o.stdout, render.EscapeLines(r.Text()))
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

// readBounded reads at most limit bytes of the regular file path (a sysfs
// attribute) with one read, as sysfs serves an attribute; anything but a regular
// file is refused without blocking (hostfs.OpenNamed).
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := hostfs.OpenNamed(nil, path, hostfs.Kind{Name: "sysfs attribute", Limit: limit})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, limit)
	k, err := f.Read(buf)
	if k == 0 && err != nil {
		return nil, err
	}
	return buf[:k], nil
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

// rdmaRates reads the rate of each RDMA device's first port under root.
func rdmaRates(root string) map[string]int {
	rates := map[string]int{}
	devs, _ := filepath.Glob(filepath.Join(root, "sys/class/infiniband/*/ports/1/rate"))
	for _, f := range devs {
		if b, err := readBounded(f, 128); err == nil {
			if r := nccl.ParseRate(string(b)); r > 0 {
				rates[filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(f))))] = r
			}
		}
	}
	return rates
}

// liveInterfaces lists this machine's network interfaces that are up with an
// address, with the device each sits on (/sys/class/net/<name>/device).
func liveInterfaces() []nccl.Interface {
	var out []nccl.Interface
	for _, ifc := range netInterfaces() {
		x := nccl.Interface{Name: ifc}
		base := filepath.Join("/sys/class/net", ifc)
		if dev, err := filepath.EvalSymlinks(filepath.Join(base, "device")); err == nil {
			if sub, err := filepath.EvalSymlinks(filepath.Join(dev, "subsystem")); err == nil {
				x.Subsystem = filepath.Base(sub)
			}
			if x.Subsystem == "pci" {
				if a, err := parseAddress(filepath.Base(dev)); err == nil {
					x.PCI = &a
				}
			}
		}
		if b, err := readBounded(filepath.Join(base, "speed"), 64); err == nil {
			if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && v > 0 {
				x.Speed = v
			}
		}
		out = append(out, x)
	}
	return out
}
