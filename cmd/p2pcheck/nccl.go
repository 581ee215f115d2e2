package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/p2pkit/p2pkit/gpu"
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
			if b, err := readBounded(filepath.Join(o.root, p), 1<<20); err == nil {
				files = append(files, nccl.ConfFile{Path: p, Data: b})
			}
		}
	}
	set := nccl.ResolveSettings(assume, env, files)
	var others []string
	if verSrc == "" && live {
		ver, verSrc, others = findLibVersion(o.root, no.lib)
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
		if no.topoXML == "-" {
			return nccl.WriteXML(o.stdout, topo)
		}
		// The one writer of outputs: atomic, never through a link, never a
		// truncated or empty target.
		err := writeFileAtomic(no.topoXML, true, func(f *os.File) error { return nccl.WriteXML(f, topo) })
		if err != nil {
			return noEvalError(err)
		}
		return nil
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

// readBounded reads at most limit bytes of a file.
func readBounded(path string, limit int64) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	buf := make([]byte, limit)
	k, err := fh.Read(buf)
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
// names, else the first found in $VIRTUAL_ENV, LD_LIBRARY_PATH and libDirs. others
// names the other versions found, which a job may load instead.
func findLibVersion(root, lib string) (v nccl.Version, src string, others []string) {
	var cands []string
	if lib != "" {
		cands = []string{lib}
	} else {
		var dirs []string
		if v := os.Getenv("VIRTUAL_ENV"); v != "" && root == "/" {
			m, _ := filepath.Glob(filepath.Join(v, "lib/python3*/site-packages/nvidia/nccl/lib"))
			dirs = append(dirs, m...)
		}
		for _, d := range filepath.SplitList(os.Getenv("LD_LIBRARY_PATH")) {
			if d != "" && root == "/" {
				dirs = append(dirs, d)
			}
		}
		for _, d := range libDirs {
			dirs = append(dirs, filepath.Join(root, d))
		}
		seen := map[string]bool{}
		for _, d := range dirs {
			m, _ := filepath.Glob(filepath.Join(d, "libnccl.so*"))
			for _, f := range m {
				if real, err := filepath.EvalSymlinks(f); err == nil && !seen[real] {
					seen[real] = true
					cands = append(cands, f)
				}
			}
		}
	}
	for _, c := range cands {
		fh, err := os.Open(c)
		if err != nil {
			continue
		}
		found, ok, _ := nccl.FindVersion(fh)
		fh.Close()
		switch {
		case !ok:
		case src == "":
			v, src = found, c
		case found != v:
			others = append(others, fmt.Sprintf("another NCCL, %s, is installed at %s: a job that loads it follows its defaults (--nccl-lib or --nccl-version to choose)", found, c))
		}
	}
	return v, src, others
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
