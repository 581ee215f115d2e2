package nccl

import (
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
	NCCLVersion   string `json:"nccl_version"`
	VersionSource string `json:"version_source"`
	// Sources says whose source lines the rules cite.
	Sources  string    `json:"sources"`
	Settings []Setting `json:"settings"`
	GPUs     []GPUInfo `json:"gpus"`
	Nets     []Net     `json:"nets"`
	// Paths are the path lines NCCL prints with NCCL_DEBUG=INFO.
	Paths    []string  `json:"paths"`
	GPUPairs []GPUPair `json:"gpu_pairs"`
	GPUNets  []GPUNet  `json:"gpu_nets"`
	GDRCopy  GDRCopy   `json:"gdrcopy"`
	// Assumptions lists facts that could not be read and what was taken instead;
	// Notes what NCCL does that is not modelled.
	Assumptions []string `json:"assumptions"`
	Notes       []string `json:"notes"`

	// work counts the links the path searches of all engines examined.
	work int64
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

// Outcome is a decision: for a GPU pair the transport and label, for a GPU and
// network device GPUDirect RDMA each way.
type Outcome struct {
	Transport string `json:"transport,omitempty"`
	Via       string `json:"via,omitempty"`
	Recv      string `json:"gdr_recv,omitempty"`
	Send      string `json:"gdr_send,omitempty"`
}

// Alternative is a decision as it would be were an unknown fact true.
type Alternative struct {
	// Fact is what was not known ("NVLink between the GPUs"), Unknown why.
	Fact    string `json:"fact"`
	Unknown string `json:"unknown"`
	Outcome
}

// GPUPair is the transport from one rank's GPU to another's.
type GPUPair struct {
	From int `json:"from"`
	To   int `json:"to"`
	// Path is the topology's path type before NCCL diverts it (NVL, PIX, PHB...),
	// Link the medium P2P would use ("NVLink" or "PCIe").
	Path PathType `json:"path"`
	Link string   `json:"link"`
	// Transport is "P2P", "SHM" or "NET", or "unknown" when it rests on a fact
	// that could not be read; Via the label NCCL prints after "via", or, then,
	// "<label> if <fact> (unknown: <why>), else <label>".
	Transport string `json:"transport"`
	Via       string `json:"via"`
	Why       string `json:"why"`
	// Rules are the NCCL functions that decided, with file and line.
	Rules []string `json:"rules"`
	// Assumed lists the facts the decision took as assumed.
	Assumed []string `json:"assumed"`
	// DependsOn holds the decision were each unknown fact true, and Otherwise
	// the decision as made without it; both absent when no unknown fact changes
	// the decision.
	DependsOn []Alternative `json:"depends_on,omitempty"`
	Otherwise *Outcome      `json:"otherwise,omitempty"`
	Changes   []Change      `json:"changes"`
}

// GPUNet is GPUDirect RDMA between a GPU and a network device.
type GPUNet struct {
	GPU  int      `json:"gpu"`
	Net  int      `json:"net"`
	Path PathType `json:"path"`
	// Recv and Send say whether NCCL writes (receives) and reads (sends) GPU
	// memory directly from the NIC: "yes", "no" or "unknown".
	Recv      string        `json:"gdr_recv"`
	Send      string        `json:"gdr_send"`
	Mode      string        `json:"mode,omitempty"`
	Why       string        `json:"why"`
	Rules     []string      `json:"rules"`
	Assumed   []string      `json:"assumed"`
	DependsOn []Alternative `json:"depends_on,omitempty"`
	Otherwise *Outcome      `json:"otherwise,omitempty"`
	Changes   []Change      `json:"changes"`
}

// GDRCopy is whether NCCL uses GDRCopy for its host-side flags (initGdrCopy in
// src/init.cc): only with NCCL_GDRCOPY_ENABLE=1 and gdrdrv 2.1 or later loaded.
type GDRCopy struct {
	Use     string   `json:"use"`
	Why     string   `json:"why"`
	Rules   []string `json:"rules"`
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
	// Unknowns are facts Topology takes as false for want of knowing them, each
	// with the topology were it true: a decision that differs between the two
	// says so (Alternative).
	Unknowns []Unknown

	// printed is the topology NCCL printed, when the input comes from a log
	// (LogInput) rather than an XML.
	printed *printedTopo
}

// Unknown is a fact a prediction needs and could not read.
type Unknown struct {
	// Fact names it ("NVLink between the GPUs"), Why says why it is not known
	// ("NVML not asked").
	Fact, Why string
	// Topology is the input's topology with the fact true.
	Topology *Node
	// tweak makes the fact true on a system built from a printed topology.
	tweak func(*System)
}

// source is a topology to build a system from: an XML, or the input's printed
// topology, with a change made to it.
type source struct {
	xml   *Node
	tweak func(*System)
	base  bool
}

// unmodelled lists what NCCL does that Predict leaves out.
var unmodelled = []string{
	"PXN (sending through an NVLink peer's NIC) and network device merging are not modelled",
	"labels are for ranks in separate processes (torchrun, mpirun); ranks sharing one process print P2P/direct pointer",
}

// predictor holds what Predict shares between its engines.
type predictor struct {
	in     Input
	ver    Version
	raw    *System
	e      *engine
	intern map[string]string
	lists  map[string][]string
	// work sums the path searches' work of every engine built.
	work int64
}

func (p *predictor) str(s string) string {
	if v, ok := p.intern[s]; ok {
		return v
	}
	p.intern[s] = s
	return s
}

func (p *predictor) strs(ss []string) []string {
	if len(ss) == 0 {
		return []string{}
	}
	key := strings.Join(ss, "\x00")
	if v, ok := p.lists[key]; ok {
		return v
	}
	v := slices.Clip(slices.Clone(ss))
	p.lists[key] = v
	return v
}

// cites is cites(keys, p.ver), memoized.
func (p *predictor) cites(keys []string) []string {
	k := "\x01" + strings.Join(keys, "\x00")
	if v, ok := p.lists[k]; ok {
		return v
	}
	v := slices.Clip(cites(keys, p.ver))
	p.lists[k] = v
	return v
}

// Predict evaluates NCCL's rules on in. It costs O(G²+G·N) decisions and a
// constant number of path computations (the prediction, each unknown fact, each
// setting tried for the changes), each O(bases·(nodes+links)), with G GPUs and N
// network devices, all within NCCL_TOPO_MAX_NODES.
func Predict(in Input) (*Report, error) {
	p := &predictor{in: in, ver: in.Version, intern: map[string]string{}, lists: map[string][]string{}}
	if p.ver.IsZero() {
		p.ver = DefaultVersion
	}
	var err error
	base := source{xml: in.Topology, base: true}
	if p.raw, err = p.rawPaths(base); err != nil {
		return nil, err
	}
	if p.e, err = p.engine(base, in.Settings, in.Facts); err != nil {
		return nil, err
	}
	e := p.e
	r := &Report{
		SchemaVersion: SchemaVersion,
		NCCLVersion:   p.ver.String(),
		VersionSource: in.VersionSource,
		Sources:       sourceRelease(p.ver),
		Settings:      in.Settings.All(),
		Nets:          in.Nets,
		Paths:         e.sys.FormatPaths(),
		Notes:         append(slices.Clone(in.Notes), unmodelled...),
		GPUs:          []GPUInfo{},
	}
	if r.Nets == nil {
		r.Nets = []Net{}
	}
	for _, g := range e.sys.nodes[nodeGPU] {
		r.GPUs = append(r.GPUs, GPUInfo{Rank: g.rank, Dev: g.dev, BusID: g.busID, SM: max(g.sm, 0)})
	}
	r.GPUPairs = p.pairs()
	r.GPUNets = p.gpuNets()
	if err := p.alternatives(r); err != nil {
		return nil, err
	}
	if err := p.changes(r); err != nil {
		return nil, err
	}
	if hasNVLinkPeers(e.sys) && hasLocalNIC(e.raw) && e.set.Int("NCCL_PXN_DISABLE", 0) != 1 {
		r.Notes = append(r.Notes, "GPUs have NVLink peers: with PXN NCCL may send to a NIC through the peer GPU closest to it; for such GPU-NIC pairs NCCL prints PXN paths and decides GPUDirect RDMA by the peer's path, which is not shown here (NCCL_PXN_DISABLE=1 turns PXN off)")
	}
	r.GDRCopy = gdrCopy(in, p.ver)
	r.Assumptions = e.unknown
	if r.Assumptions == nil {
		r.Assumptions = []string{}
	}
	r.work = p.work
	return r, nil
}

// system builds the system of src.
func (p *predictor) system(src source) (*System, error) {
	var sys *System
	var err error
	if p.in.printed != nil {
		sys, err = p.in.printed.build(p.ver)
	} else {
		sys, err = newSystem(src.xml, p.ver)
	}
	if err == nil && src.tweak != nil {
		src.tweak(sys)
	}
	return sys, err
}

// engine builds the system of src and computes NCCL's paths under set.
func (p *predictor) engine(src source, set Settings, facts Facts) (*engine, error) {
	sys, err := p.system(src)
	if err != nil {
		return nil, err
	}
	raw := p.raw
	if !src.base {
		if raw, err = p.rawPaths(src); err != nil {
			return nil, err
		}
	}
	e := &engine{sys: sys, raw: raw, set: set, ver: p.ver, facts: facts}
	e.computePaths()
	p.work += sys.work
	return e, nil
}

// rawPaths computes the paths of the topology alone, before NCCL diverts any.
func (p *predictor) rawPaths(src source) (*System, error) {
	sys, err := p.system(src)
	if err != nil {
		return nil, err
	}
	sys.computeAll(false)
	p.work += sys.work
	return sys, nil
}

func (p *predictor) pairs() []GPUPair {
	e := p.e
	gpus := e.sys.nodes[nodeGPU]
	out := make([]GPUPair, 0, len(gpus)*max(len(gpus)-1, 0))
	for _, a := range gpus {
		for _, b := range gpus {
			if a == b {
				continue
			}
			q := p.pair(e, a, b)
			q.Path = path(e.raw.nodes[nodeGPU][a.idx], nodeGPU, b.idx).typ
			q.Link = "PCIe"
			if q.Path <= PathNVB {
				q.Link = "NVLink"
			}
			out = append(out, q)
		}
	}
	return out
}

// pair decides with e and records the rules and assumptions.
func (p *predictor) pair(e *engine, a, b *topoNode) GPUPair {
	e.begin()
	q := e.pair(a, b)
	q.Why, q.Via = p.str(q.Why), p.str(q.Via)
	q.Rules = p.cites(e.cited)
	q.Assumed = p.strs(e.noted)
	q.Changes = []Change{}
	return q
}

// pair decides the transport from a to b as selectTransport (src/transport.cc)
// does: the first of P2P, SHM and NET that can connect.
func (e *engine) pair(a, b *topoNode) GPUPair {
	e.cite(ruleSelect)
	p := GPUPair{From: a.rank, To: b.rank}
	ok, why := e.p2pCanConnect(a, b)
	if ok {
		_, inter, _ := e.checkP2P(a, b)
		p.Transport, p.Via, p.Why = "P2P", e.label("P2P", a, b, inter), why
		if e.useMemcpy() {
			p.Why = e.join(why, "; NCCL_P2P_USE_CUDA_MEMCPY=1 moves the data with the copy engine (cudaMemcpy)", "")
		}
		return p
	}
	noP2P := why
	ok, why = e.shmCanConnect(a, b)
	if ok {
		p.Transport, p.Via = "SHM", e.label("SHM", a, b, nil)
		p.Why = e.join("no P2P: "+noP2P, "; SHM through host memory: ", why)
		return p
	}
	p.Transport, p.Via = "NET", e.label("NET", a, b, nil)
	p.Why = e.join("no P2P: "+noP2P, "; no SHM: ", why+"; the network transport is left")
	return p
}

func (p *predictor) gpuNets() []GPUNet {
	e := p.e
	out := make([]GPUNet, 0, len(e.sys.nodes[nodeGPU])*len(e.sys.nodes[nodeNET]))
	for _, g := range e.sys.nodes[nodeGPU] {
		for _, net := range e.sys.nodes[nodeNET] {
			e.begin()
			gn := e.gpuNet(g, net)
			gn.Why = p.str(gn.Why)
			gn.Rules = p.cites(e.cited)
			gn.Assumed = p.strs(e.noted)
			gn.Changes = []Change{}
			out = append(out, gn)
		}
	}
	return out
}

func (e *engine) gpuNet(g, net *topoNode) GPUNet {
	gn := GPUNet{GPU: g.rank, Net: net.netDev, Path: path(g, nodeNET, net.idx).typ}
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

// alternatives decides again were each unknown fact true, one topology at a time,
// and rewrites the decisions that differ into conditional ones.
func (p *predictor) alternatives(r *Report) error {
	for _, u := range p.in.Unknowns {
		w, err := p.engine(source{xml: u.Topology, tweak: u.tweak}, p.in.Settings, p.in.Facts)
		if err != nil {
			return err
		}
		for i := range r.GPUPairs {
			q := &r.GPUPairs[i]
			a, b := w.sys.byRank[q.From], w.sys.byRank[q.To]
			if a == nil || b == nil {
				continue
			}
			w.begin()
			alt := w.pair(a, b)
			if base := q.otherwise(); alt.Via != base.Via {
				q.DependsOn = append(q.DependsOn, Alternative{Fact: u.Fact, Unknown: u.Why, Outcome: Outcome{Transport: alt.Transport, Via: p.str(alt.Via)}})
			}
		}
		for i := range r.GPUNets {
			gn := &r.GPUNets[i]
			g := w.sys.byRank[gn.GPU]
			net := netByDev(w.sys, gn.Net)
			if g == nil || net == nil {
				continue
			}
			w.begin()
			alt := w.gpuNet(g, net)
			if base := gn.otherwise(); alt.Recv != base.Recv || alt.Send != base.Send {
				gn.DependsOn = append(gn.DependsOn, Alternative{Fact: u.Fact, Unknown: u.Why, Outcome: Outcome{Recv: alt.Recv, Send: alt.Send}})
			}
		}
	}
	for i := range r.GPUPairs {
		r.GPUPairs[i].conditional(p)
	}
	for i := range r.GPUNets {
		r.GPUNets[i].conditional(p)
	}
	return nil
}

func netByDev(s *System, dev int) *topoNode {
	for _, n := range s.nodes[nodeNET] {
		if n.netDev == dev {
			return n
		}
	}
	return nil
}

// otherwise is the decision as made, before any conditional rewrite.
func (q *GPUPair) otherwise() Outcome {
	if q.Otherwise != nil {
		return *q.Otherwise
	}
	return Outcome{Transport: q.Transport, Via: q.Via}
}

// conditional rewrites the verdict when an unknown fact would change it:
// "P2P/CUMEM if NVLink between the GPUs (unknown: NVML not asked), else
// SHM/direct/direct", with the transport "unknown" when it differs too.
func (q *GPUPair) conditional(p *predictor) {
	if len(q.DependsOn) == 0 {
		q.DependsOn = nil
		return
	}
	base := q.otherwise()
	q.Otherwise = &base
	var b strings.Builder
	transport := base.Transport
	for _, a := range q.DependsOn {
		b.WriteString(a.Via + " if " + a.Fact + " (unknown: " + a.Unknown + "), else ")
		if a.Transport != base.Transport {
			transport = "unknown"
		}
	}
	b.WriteString(base.Via)
	q.Transport, q.Via = transport, p.str(b.String())
}

func (gn *GPUNet) otherwise() Outcome {
	if gn.Otherwise != nil {
		return *gn.Otherwise
	}
	return Outcome{Recv: gn.Recv, Send: gn.Send}
}

// conditional marks GPUDirect RDMA unknown each way an unknown fact would change,
// and says so in the reason.
func (gn *GPUNet) conditional(p *predictor) {
	if len(gn.DependsOn) == 0 {
		gn.DependsOn = nil
		return
	}
	base := gn.otherwise()
	gn.Otherwise = &base
	var b strings.Builder
	for _, a := range gn.DependsOn {
		if a.Recv != base.Recv {
			gn.Recv = "unknown"
		}
		if a.Send != base.Send {
			gn.Send = "unknown"
		}
		b.WriteString("recv " + a.Recv + ", send " + a.Send + " if " + a.Fact + " (unknown: " + a.Unknown + "); ")
	}
	gn.Why = p.str(b.String() + "else recv " + base.Recv + ", send " + base.Send + ": " + gn.Why)
}
