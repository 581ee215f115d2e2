package nccl

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// SchemaVersion is the version of the JSON report (schema/nccl.v1.json).
const SchemaVersion = "1"

// Report is what NCCL will do on the node.
type Report struct {
	SchemaVersion string `json:"schema_version"`
	// NCCLVersion is the release whose defaults apply, and VersionSource where it
	// came from (a libnccl path, "--nccl-version" or "default").
	NCCLVersion   string    `json:"nccl_version"`
	VersionSource string    `json:"version_source"`
	Settings      []Setting `json:"settings"`
	GPUs          []GPUInfo `json:"gpus"`
	Nets          []Net     `json:"nets"`
	// Paths are the path lines NCCL prints with NCCL_DEBUG=INFO.
	Paths    []string  `json:"paths"`
	GPUPairs []GPUPair `json:"gpu_pairs"`
	GPUNets  []GPUNet  `json:"gpu_nets"`
	GDRCopy  GDRCopy   `json:"gdrcopy"`
	// Assumptions lists facts that could not be read and what was taken instead;
	// Notes what NCCL does that is not modelled.
	Assumptions []string `json:"assumptions"`
	Notes       []string `json:"notes"`
}

// GPUInfo is one GPU as NCCL numbers it.
type GPUInfo struct {
	Rank  int    `json:"rank"`
	Dev   int    `json:"dev"`
	BusID string `json:"bus_id"`
	SM    int    `json:"sm,omitempty"`
}

// Change is a setting that changes a decision, and what it changes it to.
type Change struct {
	Setting string `json:"setting"`
	Effect  string `json:"effect"`
}

// GPUPair is the transport from one rank's GPU to another's.
type GPUPair struct {
	From int `json:"from"`
	To   int `json:"to"`
	// Path is the topology's path type before NCCL diverts it (NVL, PIX, PHB...),
	// Link the medium P2P would use ("NVLink" or "PCIe").
	Path PathType `json:"path"`
	Link string   `json:"link"`
	// Transport is "P2P", "SHM" or "NET"; Via the label NCCL prints after "via".
	Transport string   `json:"transport"`
	Via       string   `json:"via"`
	Why       string   `json:"why"`
	Changes   []Change `json:"changes"`
}

// GPUNet is GPUDirect RDMA between a GPU and a network device.
type GPUNet struct {
	GPU  int      `json:"gpu"`
	Net  int      `json:"net"`
	Path PathType `json:"path"`
	// Recv and Send say whether NCCL writes (receives) and reads (sends) GPU
	// memory directly from the NIC: "yes", "no" or "unknown".
	Recv    string   `json:"gdr_recv"`
	Send    string   `json:"gdr_send"`
	Mode    string   `json:"mode,omitempty"`
	Why     string   `json:"why"`
	Changes []Change `json:"changes"`
}

// GDRCopy is whether NCCL uses GDRCopy for its host-side flags (initGdrCopy in
// src/init.cc): only with NCCL_GDRCOPY_ENABLE=1 and gdrdrv 2.1 or later loaded.
type GDRCopy struct {
	Use     string   `json:"use"`
	Why     string   `json:"why"`
	Changes []Change `json:"changes"`
}

// Input is what Predict evaluates.
type Input struct {
	// Topology is NCCL's topology XML (Machine.XML or a file).
	Topology *Node
	Nets     []Net
	Facts    Facts
	Settings Settings
	Version  Version
	// VersionSource says where Version came from.
	VersionSource string
	// Notes are carried into the report (e.g. from Machine.XML).
	Notes []string
}

// unmodelled lists what NCCL does that Predict leaves out.
var unmodelled = []string{
	"PXN (sending through an NVLink peer's NIC) and network device merging are not modelled",
	"labels are for ranks in separate processes (torchrun, mpirun); ranks sharing one process print P2P/direct pointer",
}

// Predict evaluates NCCL's rules on in.
func Predict(in Input) (*Report, error) {
	e, err := newEngine(in, in.Settings)
	if err != nil {
		return nil, err
	}
	r := &Report{
		SchemaVersion: SchemaVersion,
		NCCLVersion:   in.Version.String(),
		VersionSource: in.VersionSource,
		Settings:      in.Settings.All(),
		Nets:          in.Nets,
		Paths:         e.sys.FormatPaths(),
		Notes:         append(slices.Clone(in.Notes), unmodelled...),
	}
	if r.Nets == nil {
		r.Nets = []Net{}
	}
	for _, g := range e.sys.nodes[nodeGPU] {
		r.GPUs = append(r.GPUs, GPUInfo{Rank: g.rank, Dev: g.dev, BusID: g.busID, SM: max(g.sm, 0)})
	}
	for _, a := range e.sys.nodes[nodeGPU] {
		for j, b := range e.sys.nodes[nodeGPU] {
			if a == b {
				continue
			}
			p := e.pair(a, b)
			p.Path = path(e.raw.nodes[nodeGPU][e.gpuIndex(a)], nodeGPU, j).typ
			p.Link = "PCIe"
			if p.Path <= PathNVB {
				p.Link = "NVLink"
			}
			p.Changes = e.pairChanges(in, a.rank, b.rank, p)
			r.GPUPairs = append(r.GPUPairs, p)
		}
	}
	for _, g := range e.sys.nodes[nodeGPU] {
		for n, net := range e.sys.nodes[nodeNET] {
			gn := e.gpuNet(g, net)
			gn.Changes = e.netChanges(in, g.rank, n, gn)
			r.GPUNets = append(r.GPUNets, gn)
		}
	}
	if hasNVLinkPeers(e.sys) && hasLocalNIC(e.raw) && e.set.Int("NCCL_PXN_DISABLE", 0) != 1 {
		r.Notes = append(r.Notes, "GPUs have NVLink peers: with PXN NCCL may send to a NIC through the peer GPU closest to it; for such GPU-NIC pairs NCCL prints PXN paths and decides GPUDirect RDMA by the peer's path, which is not shown here (NCCL_PXN_DISABLE=1 turns PXN off)")
	}
	r.GDRCopy = gdrCopy(in)
	r.Assumptions = e.unknown
	if r.Assumptions == nil {
		r.Assumptions = []string{}
	}
	if r.GPUPairs == nil {
		r.GPUPairs = []GPUPair{}
	}
	if r.GPUNets == nil {
		r.GPUNets = []GPUNet{}
	}
	if r.GPUs == nil {
		r.GPUs = []GPUInfo{}
	}
	return r, nil
}

// hasNVLinkPeers reports whether any two GPUs are joined by NVLink (NVL).
func hasNVLinkPeers(s *System) bool {
	for _, g := range s.nodes[nodeGPU] {
		for i, o := range s.nodes[nodeGPU] {
			if o != g && path(g, nodeGPU, i).typ == PathNVL {
				return true
			}
		}
	}
	return false
}

// hasLocalNIC reports whether some GPU reaches a network device at PXB or closer,
// the condition for another GPU to relay through it (PXN).
func hasLocalNIC(s *System) bool {
	for _, g := range s.nodes[nodeGPU] {
		for n := range s.nodes[nodeNET] {
			if path(g, nodeNET, n).typ <= PathPXB {
				return true
			}
		}
	}
	return false
}

// newEngine builds the system from the XML and computes NCCL's paths under set.
func newEngine(in Input, set Settings) (*engine, error) {
	sys, err := NewSystem(in.Topology)
	if err != nil {
		return nil, err
	}
	raw, err := rawPaths(in)
	if err != nil {
		return nil, err
	}
	e := &engine{sys: sys, raw: raw, set: set, ver: in.Version, facts: in.Facts}
	if e.ver.IsZero() {
		e.ver = DefaultVersion
	}
	e.computePaths()
	return e, nil
}

// rawPaths computes the paths of the topology alone, before NCCL diverts any.
func rawPaths(in Input) (*System, error) {
	sys, err := NewSystem(in.Topology)
	if err != nil {
		return nil, err
	}
	for _, t := range []int{nodeCPU, nodeGPU, nodeNET, nodeNVS} {
		for _, n := range sys.nodes[t] {
			sys.setPaths(n, false)
		}
	}
	return sys, nil
}

// pair decides the transport from a to b as selectTransport (src/transport.cc)
// does: the first of P2P, SHM and NET that can connect.
func (e *engine) pair(a, b *topoNode) GPUPair {
	p := GPUPair{From: a.rank, To: b.rank}
	if ok, why := e.p2pCanConnect(a, b); ok {
		_, inter, _ := e.checkP2P(a, b)
		p.Transport, p.Via, p.Why = "P2P", e.label("P2P", a, b, inter), why
		if e.useMemcpy() {
			p.Why += "; NCCL_P2P_USE_CUDA_MEMCPY=1 moves the data with the copy engine (cudaMemcpy)"
		}
		return p
	} else {
		p.Why = "no P2P: " + why
	}
	if ok, why := e.shmCanConnect(a, b); ok {
		p.Transport, p.Via = "SHM", e.label("SHM", a, b, nil)
		p.Why += "; SHM through host memory: " + why
		return p
	} else {
		p.Why += "; no SHM: " + why
	}
	p.Transport, p.Via = "NET", e.label("NET", a, b, nil)
	p.Why += "; the network transport is left"
	return p
}

func (e *engine) gpuNet(g, net *topoNode) GPUNet {
	n := slices.Index(e.sys.nodes[nodeNET], net)
	gn := GPUNet{GPU: g.rank, Net: net.netDev, Path: path(g, nodeNET, n).typ}
	recv, why := e.checkGdr(g, net, false)
	send, whySend := e.checkGdr(g, net, true)
	gn.Recv, gn.Send, gn.Mode, gn.Why = yesNo(recv != ""), yesNo(send != ""), recv, why
	if whySend != why {
		gn.Why += "; sends: " + whySend
	}
	return gn
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// whatIf re-runs the prediction with one setting changed ("" value: unset).
func whatIf(in Input, name, value string) (*engine, error) {
	set := in.Settings.With(name, value, SourceAssume)
	if value == "" {
		set = in.Settings.without(name)
	}
	return newEngine(in, set)
}

func (s Settings) without(name string) Settings {
	c := s.With(name, "", "")
	delete(c.vars, name)
	return c
}

// pairChanges tries the settings that move a pair to another transport and keeps
// those that do.
func (e *engine) pairChanges(in Input, from, to int, p GPUPair) []Change {
	cands := []struct{ name, value string }{}
	for _, n := range []string{"NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE", "NCCL_P2P_USE_CUDA_MEMCPY", "NCCL_NET_DISABLE_INTRA"} {
		if _, ok := in.Settings.Get(n); ok {
			cands = append(cands, struct{ name, value string }{n, ""})
		}
	}
	switch p.Transport {
	case "P2P":
		cands = append(cands, struct{ name, value string }{"NCCL_P2P_DISABLE", "1"}, struct{ name, value string }{"NCCL_P2P_USE_CUDA_MEMCPY", "1"})
	case "SHM":
		cands = append(cands, struct{ name, value string }{"NCCL_P2P_LEVEL", p.Path.String()}, struct{ name, value string }{"NCCL_SHM_DISABLE", "1"})
	case "NET":
		cands = append(cands, struct{ name, value string }{"NCCL_P2P_LEVEL", "SYS"}, struct{ name, value string }{"NCCL_NET_DISABLE_INTRA", "1"})
	}
	var out []Change
	for _, c := range cands {
		w, err := whatIf(in, c.name, c.value)
		if err != nil {
			continue
		}
		a, b := w.sys.nodes[nodeGPU][rankIndex(w.sys, from)], w.sys.nodes[nodeGPU][rankIndex(w.sys, to)]
		q := w.pair(a, b)
		if q.Via == p.Via {
			continue
		}
		set := c.name + "=" + c.value
		if c.value == "" {
			set = "unset " + c.name
		}
		out = append(out, Change{Setting: set, Effect: q.Transport + " (via " + q.Via + ")"})
	}
	if out == nil {
		out = []Change{}
	}
	return out
}

func rankIndex(s *System, rank int) int {
	return slices.IndexFunc(s.nodes[nodeGPU], func(n *topoNode) bool { return n.rank == rank })
}

func (e *engine) netChanges(in Input, rank, n int, gn GPUNet) []Change {
	var cands [][2]string
	if _, ok := in.Settings.Get("NCCL_NET_GDR_LEVEL"); ok {
		cands = append(cands, [2]string{"NCCL_NET_GDR_LEVEL", ""})
	}
	if gn.Recv == "yes" {
		cands = append(cands, [2]string{"NCCL_NET_GDR_LEVEL", "LOC"})
	} else {
		cands = append(cands, [2]string{"NCCL_NET_GDR_LEVEL", gn.Path.String()})
	}
	out := []Change{}
	for _, c := range cands {
		w, err := whatIf(in, c[0], c[1])
		if err != nil {
			continue
		}
		q := w.gpuNet(w.sys.nodes[nodeGPU][rankIndex(w.sys, rank)], w.sys.nodes[nodeNET][n])
		if q.Recv == gn.Recv && q.Send == gn.Send {
			continue
		}
		set := c[0] + "=" + c[1]
		if c[1] == "" {
			set = "unset " + c[0]
		}
		out = append(out, Change{Setting: set, Effect: "GPUDirect RDMA recv " + q.Recv + ", send " + q.Send})
	}
	return out
}

// gdrCopy mirrors initGdrCopy (src/init.cc) and ncclGdrInit (src/include/gdrwrap.h).
func gdrCopy(in Input) GDRCopy {
	enabled := in.Settings.Int("NCCL_GDRCOPY_ENABLE", 0) == 1
	g := GDRCopy{Changes: []Change{}}
	switch {
	case !enabled:
		g.Use, g.Why = "no", "NCCL_GDRCOPY_ENABLE is not 1 (NCCL's default is 0)"
		switch {
		case in.Facts.GDRDrv != nil && *in.Facts.GDRDrv:
			g.Changes = append(g.Changes, Change{"NCCL_GDRCOPY_ENABLE=1", "GDRCopy for NCCL's host-side flags (gdrdrv is loaded; libgdrapi 2.1 or later must be installed)"})
		default:
			g.Changes = append(g.Changes, Change{"NCCL_GDRCOPY_ENABLE=1", "GDRCopy once gdrdrv (2.1 or later) is loaded and libgdrapi installed"})
		}
	case in.Facts.GDRDrv == nil:
		g.Use, g.Why = "unknown", "NCCL_GDRCOPY_ENABLE=1, but whether gdrdrv is loaded could not be read"
	case !*in.Facts.GDRDrv:
		g.Use, g.Why = "no", "NCCL_GDRCOPY_ENABLE=1, but gdrdrv is not loaded (no module or no /dev/gdrdrv): NCCL goes on without GDRCopy"
	default:
		g.Use, g.Why = "yes", "NCCL_GDRCOPY_ENABLE=1 and gdrdrv is loaded (libgdrapi.so 2.1 or later must be installed, which p2pcheck cannot see)"
		g.Changes = append(g.Changes, Change{"NCCL_GDRCOPY_ENABLE=0", "no GDRCopy"})
	}
	return g
}

// Text writes the report for people.
func (r *Report) Text() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "NCCL %s (%s)\n", r.NCCLVersion, r.VersionSource)
	if len(r.Settings) > 0 {
		b.WriteString("settings:\n")
		for _, s := range r.Settings {
			fmt.Fprintf(&b, "  %s=%s (%s)\n", s.Name, s.Value, s.Source)
		}
	}
	b.WriteString("\nGPU pairs:\n")
	if len(r.GPUPairs) == 0 {
		b.WriteString("  none (fewer than two GPUs)\n")
	}
	for _, p := range r.GPUPairs {
		fmt.Fprintf(&b, "  GPU%d -> GPU%d  %-4s %-6s via %s\n      %s\n", p.From, p.To, p.Path, p.Link, p.Via, p.Why)
		for _, c := range p.Changes {
			fmt.Fprintf(&b, "      %s: %s\n", c.Setting, c.Effect)
		}
	}
	b.WriteString("\nnetwork devices:\n")
	if len(r.Nets) == 0 {
		b.WriteString("  none known\n")
	}
	for _, n := range r.Nets {
		where := n.BusID
		if where == "" {
			where = "not PCI: attached to the first CPU"
		}
		fmt.Fprintf(&b, "  NET/%d %s (%s, %s) GPUDirect RDMA support %s: %s\n", n.Dev, n.Name, n.Plugin, where, n.GDR, n.Why)
	}
	if len(r.GPUNets) > 0 {
		b.WriteString("\nGPUDirect RDMA:\n")
	}
	for _, g := range r.GPUNets {
		fmt.Fprintf(&b, "  GPU%d - NET/%d  %-4s recv %s, send %s: %s\n", g.GPU, g.Net, g.Path, g.Recv, g.Send, g.Why)
		for _, c := range g.Changes {
			fmt.Fprintf(&b, "      %s: %s\n", c.Setting, c.Effect)
		}
		if len(g.Changes) == 0 && strings.HasPrefix(g.Why, "the network device") {
			b.WriteString("      no NCCL setting changes this: it needs an RDMA NIC (InfiniBand or RoCE) with nvidia-peermem loaded or DMA-BUF (open NVIDIA kernel modules, Linux 5.12+)\n")
		}
	}
	fmt.Fprintf(&b, "\nGDRCopy: %s: %s\n", r.GDRCopy.Use, r.GDRCopy.Why)
	for _, c := range r.GDRCopy.Changes {
		fmt.Fprintf(&b, "      %s: %s\n", c.Setting, c.Effect)
	}
	b.WriteString("\nNCCL's path lines (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=GRAPH):\n")
	for _, p := range r.Paths {
		b.WriteString("  " + strings.TrimRight(p, " ") + "\n")
	}
	if len(r.Assumptions) > 0 {
		b.WriteString("\nassumed:\n")
		for _, a := range r.Assumptions {
			b.WriteString("  " + a + "\n")
		}
	}
	b.WriteString("\nnot modelled:\n")
	for _, n := range r.Notes {
		b.WriteString("  " + n + "\n")
	}
	return b.String()
}
