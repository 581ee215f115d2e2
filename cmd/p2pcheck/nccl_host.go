package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/nccl"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/snapshot"
)

// Seams for tests: how the live host's facts are read, and whether a --root tree
// may stand for the machine they describe (as nvmlOnRoot does for NVML).
var (
	probeNCCLHost = liveNCCLHost
	ncclOnRoot    = false
)

// liveNCCLHost reads what NCCL would read of this process's host: the NCCL_*
// environment, the home directory, the interfaces up with an address, and the
// libnccl.so found below the run's root.
func liveNCCLHost(o *globalOptions, lib string) nccl.Host {
	h := nccl.Host{Env: map[string]string{}, Interfaces: netInterfaces()}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "NCCL_") {
			h.Env[k] = v
		}
	}
	if h.Interfaces == nil {
		h.Interfaces = []string{}
	}
	h.Home, _ = os.UserHomeDir()
	if v, src, others := o.findLibVersion(lib); src != "" {
		h.Lib = &nccl.Lib{Version: v.String(), Path: src, Others: others}
	}
	return h
}

// ncclLive reports whether the machine being read is the one p2pcheck runs on,
// whose environment, interfaces and libraries are NCCL's.
func (o *globalOptions) ncclLive() bool {
	return o.snapshot == "" && (o.root == "/" || ncclOnRoot)
}

// ncclHost returns the host facts 'p2pcheck nccl' uses: the live host's, or those
// a snapshot (or a --root tree unpacked from one) recorded, or, for a tree that
// recorded none, only the libnccl.so found below it. recorded is set for
// recorded facts.
func (o *globalOptions) ncclHost(root hostfs.Root, lib string) (h nccl.Host, recorded bool, err error) {
	if o.ncclLive() {
		return probeNCCLHost(o, lib), false, nil
	}
	b, err := snapshot.RecordedNCCL(root)
	if err != nil {
		return nccl.Host{}, false, err
	}
	if b != nil {
		p, err := nccl.ParseHost(b)
		if err != nil {
			return nccl.Host{}, false, fmt.Errorf("%s: %w", o.source(), err)
		}
		return *p, true, nil
	}
	h = nccl.Host{Env: map[string]string{}}
	if o.snapshot == "" {
		if v, src, others := o.findLibVersion(lib); src != "" {
			h.Lib = &nccl.Lib{Version: v.String(), Path: src, Others: others}
		}
	}
	return h, false, nil
}

// ncclRecord returns the host facts a snapshot records for 'p2pcheck nccl', and
// the configuration files NCCL would read there, as root-relative names; nil
// where p2pcheck does not run on the machine it captures.
func (o *globalOptions) ncclRecord() ([]byte, []string) {
	if !o.ncclLive() {
		return nil, nil
	}
	h := probeNCCLHost(o, "")
	b, err := json.Marshal(h)
	if err != nil {
		return nil, nil
	}
	var conf []string
	for _, p := range nccl.ConfPaths(h.Env, h.Home) {
		if path.IsAbs(p) {
			conf = append(conf, strings.TrimPrefix(path.Clean(p), "/"))
		}
	}
	return b, conf
}

// ncclConfFiles reads the configuration files NCCL reads (nccl.ConfPaths): on
// the machine p2pcheck runs on as readNCCLConf reads them, else below root (a
// snapshot keeps them at their paths). A relative NCCL_CONF_FILE, which NCCL
// opens from the job's working directory, is not read.
func (o *globalOptions) ncclConfFiles(root hostfs.Root, paths []string) []nccl.ConfFile {
	read := func(p string) ([]byte, error) {
		return root.ReadKind(strings.TrimPrefix(path.Clean(p), "/"), kindNCCLConf)
	}
	if o.ncclLive() {
		read = o.readNCCLConf
	}
	var files []nccl.ConfFile
	for _, p := range paths {
		if !path.IsAbs(p) || path.Clean(p) == "/" {
			continue
		}
		if b, err := read(p); err == nil {
			files = append(files, nccl.ConfFile{Path: p, Data: b})
		}
	}
	return files
}

// ncclInterfaces describes the interfaces named, as NCCL's Socket transport
// finds them below root: the device /sys/class/net/<name>/device leads to and
// its bus (ncclNetSocketGetPciPath, ncclTopoGetSubsystem in src/graph/xml.cc),
// and /sys/class/net/<name>/speed.
func ncclInterfaces(root hostfs.Root, names []string) []nccl.Interface {
	if names == nil {
		return nil
	}
	out := []nccl.Interface{}
	for _, name := range names {
		x := nccl.Interface{Name: name}
		dir := "sys/class/net/" + name
		if t, err := root.LinkTarget(dir); err == nil {
			dir = t
		}
		if dev, err := root.LinkTarget(dir + "/device"); err == nil {
			if sub, err := root.ReadLink(dev + "/subsystem"); err == nil {
				x.Subsystem = path.Base(sub)
			}
			if x.Subsystem == "pci" {
				if a, err := pcie.ParseAddress(path.Base(dev)); err == nil {
					x.PCI = &a
				}
			}
		}
		if b, err := root.ReadFile(dir+"/speed", 64); err == nil {
			if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && v > 0 {
				x.Speed = v
			}
		}
		out = append(out, x)
	}
	return out
}

// ncclRDMARates reads the rate of each RDMA device's first port below root
// (/sys/class/infiniband/<dev>/ports/1/rate).
func ncclRDMARates(root hostfs.Root) map[string]int {
	rates := map[string]int{}
	ents, err := root.ReadDir("sys/class/infiniband")
	if err != nil {
		return rates
	}
	for _, e := range ents {
		if b, err := root.ReadFile("sys/class/infiniband/"+e.Name+"/ports/1/rate", 128); err == nil {
			if r := nccl.ParseRate(string(b)); r > 0 {
				rates[e.Name] = r
			}
		}
	}
	return rates
}
