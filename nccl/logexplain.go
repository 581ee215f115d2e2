package nccl

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// LogSchemaVersion is the version of the JSON explanation (schema/nccl-log.v1.json).
const LogSchemaVersion = "1"

// LogReport explains what NCCL logged: each decision with the rule that made it
// and the setting that would change it, compared with p2pcheck's prediction for
// the same topology where one is known.
type LogReport struct {
	SchemaVersion string `json:"schema_version"`
	// NCCLVersion is the release whose rules apply, VersionSource where it came
	// from ("the log" or "--nccl-version"), Sources whose source lines the
	// rules cite.
	NCCLVersion   string       `json:"nccl_version"`
	VersionSource string       `json:"version_source"`
	Sources       string       `json:"sources"`
	Logs          []string     `json:"logs"`
	Settings      []LogSetting `json:"settings"`
	Plugin        string       `json:"plugin,omitempty"`
	Ranks         []LogRank    `json:"ranks"`
	// Topology says what the prediction was made for: "--topo-file FILE", the
	// topology NCCL printed on a host, or why there is none.
	Topology    string         `json:"topology"`
	Channels    []ChannelGroup `json:"channels"`
	GDR         []LogGDR       `json:"gdr"`
	GDRCopy     LogGDRCopy     `json:"gdrcopy"`
	PathLines   *PathCheck     `json:"path_lines,omitempty"`
	Disagree    []Disagreement `json:"disagreements"`
	Warnings    []string       `json:"warnings"`
	Lines       int            `json:"lines"`
	OtherLines  int            `json:"other_lines"`
	Skipped     int            `json:"skipped_lines"`
	NotUnderst  []string       `json:"not_understood"`
	NotUndCount int            `json:"not_understood_count"`
	Notes       []string       `json:"notes"`
}

// LogSetting is a setting NCCL printed, and what it decides.
type LogSetting struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	Decides string `json:"decides"`
}

// LogRank is one rank and the host it ran on.
type LogRank struct {
	Rank    int    `json:"rank"`
	Host    string `json:"host"`
	BusID   string `json:"bus_id"`
	CudaDev int    `json:"cuda_dev"`
	NvmlDev int    `json:"nvml_dev"`
}

// ChannelGroup is the channel lines of one connection: the same ranks, side and
// label, on every channel listed.
type ChannelGroup struct {
	From     int    `json:"from"`
	To       int    `json:"to"`
	Side     string `json:"side,omitempty"`
	Via      string `json:"via"`
	Channels []int  `json:"channels"`
	Lines    int    `json:"lines"`
	// Transport is the label's transport, Why the decision's explanation, Rules
	// the NCCL functions that made it, Changes the settings that would change it.
	Transport string   `json:"transport"`
	Why       string   `json:"why"`
	Rules     []string `json:"rules"`
	Changes   []Change `json:"changes"`
	// Predicted is p2pcheck's label for the connection, Agrees whether NCCL's is
	// the same: "yes", "no" (see the disagreements) or "not compared".
	Predicted string `json:"predicted,omitempty"`
	Agrees    string `json:"agrees"`
}

// LogGDR explains one GPU Direct RDMA line.
type LogGDR struct {
	Line      string   `json:"line"`
	Host      string   `json:"host"`
	Why       string   `json:"why"`
	Rules     []string `json:"rules"`
	Changes   []Change `json:"changes"`
	Predicted string   `json:"predicted,omitempty"`
	Agrees    string   `json:"agrees"`
}

// LogGDRCopy explains whether NCCL used GDRCopy.
type LogGDRCopy struct {
	Used  bool     `json:"used"`
	Line  string   `json:"line,omitempty"`
	Why   string   `json:"why"`
	Rules []string `json:"rules"`
}

// PathCheck compares NCCL's path lines with the predicted ones.
type PathCheck struct {
	Host      string `json:"host"`
	Equal     int    `json:"equal"`
	Different int    `json:"different"`
}

// Disagreement is a decision NCCL made otherwise than predicted, and what
// explains it.
type Disagreement struct {
	What        string `json:"what"`
	NCCL        string `json:"nccl"`
	Predicted   string `json:"predicted"`
	Explanation string `json:"explanation"`
}

// Prediction is a prediction for one host of a log.
type Prediction struct {
	Host   string
	Report *Report
}

// ExplainLog explains l under release v with the predictions made for its hosts
// (none, one from --topo-file, or one per host that printed its topology).
func ExplainLog(l *Log, v Version, versionSource string, topology string, preds []Prediction) *LogReport {
	x := &explainer{l: l, v: v, preds: preds, hostOf: map[int]string{}}
	for _, r := range l.Ranks {
		if _, ok := x.hostOf[r.Rank]; !ok {
			x.hostOf[r.Rank] = r.Host
		}
	}
	// A channel line is printed by its own side's process: the sender's for P2P,
	// SHM and [send] (p2pSendSetup, shmSendSetup, sendSetup), the receiver's for
	// [receive] (recvSetup). Where no Init line placed a rank, its lines do.
	for _, c := range l.Channels {
		rank := c.From
		if c.Side == "receive" {
			rank = c.To
		}
		if _, ok := x.hostOf[rank]; !ok && c.Host != "" {
			x.hostOf[rank] = c.Host
		}
	}
	r := &LogReport{SchemaVersion: LogSchemaVersion, NCCLVersion: v.String(), VersionSource: versionSource,
		Sources: sourceRelease(v), Plugin: l.Plugin, Topology: topology, Lines: l.Lines, OtherLines: l.Other,
		Skipped: l.Skipped, NotUnderst: nonNil(l.Unknown), NotUndCount: l.UnknownCount, Warnings: nonNil(l.Warnings),
		Disagree: []Disagreement{}, Logs: []string{}, Notes: []string{}}
	if len(l.Versions) > 1 {
		r.Notes = append(r.Notes, fmt.Sprintf("the ranks printed %d NCCL versions; the rules of %s apply", len(l.Versions), v))
	}
	r.Settings = x.settings()
	r.Ranks = x.ranks()
	r.Channels = x.channels(r)
	r.GDR = x.gdrLines(r)
	r.GDRCopy = x.gdrCopy()
	r.PathLines = x.paths(r)
	return r
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

type explainer struct {
	l      *Log
	v      Version
	preds  []Prediction
	hostOf map[int]string
}

// settingDecides says what each setting p2pcheck models decides.
var settingDecides = map[string]string{
	"NCCL_P2P_LEVEL":           "the farthest path P2P may take (ncclTopoCheckP2p)",
	"NCCL_P2P_DISABLE":         "P2P off when 1 (ncclTopoCheckP2p)",
	"NCCL_SHM_DISABLE":         "SHM off when 1 (shmCanConnect)",
	"NCCL_NET_GDR_LEVEL":       "the farthest path GPUDirect RDMA may take (ncclTopoCheckGdr)",
	"NCCL_NET_GDR_READ":        "GPUDirect RDMA for sends (ncclTopoCheckGdr)",
	"NCCL_NET_GDR_C2C":         "GPUDirect RDMA over C2C (ncclTopoCheckGdr)",
	"NCCL_GDRCOPY_ENABLE":      "GDRCopy for NCCL's host-side flags (initGdrCopy)",
	"NCCL_CUMEM_ENABLE":        "P2P/CUMEM rather than P2P/IPC (ncclCuMemEnable)",
	"NCCL_P2P_USE_CUDA_MEMCPY": "P2P through the copy engine, P2P/.../CE (p2pCanConnect)",
	"NCCL_P2P_READ_ENABLE":     "P2P reads, P2P/.../read (p2pSendSetup)",
	"NCCL_NET_DISABLE_INTRA":   "the network between GPUs of one host (ncclTopoCheckNet)",
	"NCCL_IB_DISABLE":          "the IB transport (net_ib.cc)",
	"NCCL_NET":                 "which network plugin is used",
	"NCCL_SOCKET_IFNAME":       "the interfaces of the Socket transport (ncclFindInterfaces)",
	"NCCL_HOSTID":              "the host a rank belongs to (getHostHash): ranks of different hosts use the network",
	"NCCL_DMABUF_ENABLE":       "GPUDirect RDMA through DMA-BUF (ncclIbGetPhysProperties)",
	"NCCL_PXN_DISABLE":         "sending through an NVLink peer's NIC (PXN), not modelled",
	"NCCL_NVB_DISABLE":         "NVLink through an intermediate GPU (ncclTopoSetPaths)",
	"NCCL_SHM_USE_CUDA_MEMCPY": "SHM through the copy engine, SHM/CE/... (shmSendSetup)",
	"NCCL_IGNORE_DISABLED_P2P": "whether NVML's P2P status is checked (ncclTopoCheckP2p)",
	"NCCL_TOPO_FILE":           "the topology NCCL starts from instead of detecting it",
	"NCCL_TOPO_DUMP_FILE":      "where NCCL writes its topology (no decision)",
}

func (x *explainer) settings() []LogSetting {
	names := make([]string, 0, len(x.l.Settings))
	for k := range x.l.Settings {
		names = append(names, k)
	}
	slices.Sort(names)
	out := []LogSetting{}
	for _, n := range names {
		d, ok := settingDecides[n]
		if !ok {
			d = "not a decision p2pcheck explains"
		}
		out = append(out, LogSetting{Name: n, Value: x.l.Settings[n], Decides: d})
	}
	return out
}

func (x *explainer) ranks() []LogRank {
	out := []LogRank{}
	seen := map[int]bool{}
	for _, r := range x.l.Ranks {
		if !seen[r.Rank] {
			seen[r.Rank] = true
			out = append(out, LogRank{Rank: r.Rank, Host: r.Host, BusID: r.BusID, CudaDev: r.CudaDev, NvmlDev: r.NvmlDev})
		}
	}
	slices.SortFunc(out, func(a, b LogRank) int { return a.Rank - b.Rank })
	return out
}

// sameHost reports whether two ranks are on one host: yes, no, or unknown when
// the log does not say where a rank ran.
func (x *explainer) sameHost(a, b int) string {
	ha, oka := x.hostOf[a]
	hb, okb := x.hostOf[b]
	switch {
	case !oka || !okb:
		return "unknown"
	case ha != hb:
		return "no"
	case !x.l.Prefixed && !strings.HasPrefix(ha, "NCCL_HOSTID="):
		// Without prefixes a log's lines are placed on one host only by NCCL's
		// own count of nodes.
		for _, c := range x.l.Comms {
			if c.NNodes == 1 {
				return "yes"
			}
		}
		return "unknown"
	}
	for _, c := range x.l.Comms {
		if c.NNodes > 1 && x.hosts() == 1 {
			return "unknown" // several nodes, and nothing tells them apart
		}
	}
	return "yes"
}

// hosts counts the hosts the ranks were placed on.
func (x *explainer) hosts() int {
	seen := map[string]bool{}
	for _, h := range x.hostOf {
		seen[h] = true
	}
	return len(seen)
}

// prediction returns the prediction of the host rank ran on, nil when none.
func (x *explainer) prediction(rank int) *Report {
	h, ok := x.hostOf[rank]
	for _, p := range x.preds {
		if p.Host == h || !ok && len(x.preds) == 1 {
			return p.Report
		}
	}
	return nil
}

// channels groups the channel lines and explains each group.
func (x *explainer) channels(r *LogReport) []ChannelGroup {
	type key struct {
		from, to  int
		side, via string
	}
	var order []key
	groups := map[key]*ChannelGroup{}
	for _, c := range x.l.Channels {
		k := key{c.From, c.To, c.Side, c.Via}
		g := groups[k]
		if g == nil {
			g = &ChannelGroup{From: c.From, To: c.To, Side: c.Side, Via: c.Via, Changes: []Change{}, Rules: []string{}}
			groups[k] = g
			order = append(order, k)
		}
		g.Lines++
		if !slices.Contains(g.Channels, c.ID) {
			g.Channels = append(g.Channels, c.ID)
		}
	}
	out := make([]ChannelGroup, 0, len(order))
	for _, k := range order {
		g := groups[k]
		slices.Sort(g.Channels)
		x.explainChannel(g)
		if g.Agrees == "no" {
			r.Disagree = append(r.Disagree, Disagreement{What: fmt.Sprintf("channel %d -> %d%s", g.From, g.To, sideWord(g.Side)),
				NCCL: g.Via, Predicted: g.Predicted, Explanation: disagreeWhy(g)})
		}
		out = append(out, *g)
	}
	return out
}

func sideWord(side string) string {
	if side == "" {
		return ""
	}
	return " [" + side + "]"
}

// label is a channel label taken apart: "NET/IB/0(1)/GDRDMA(PCI)/Shared".
type label struct {
	transport, kind, plugin string
	dev, proxy              int
	read, ce, gdr, pci      bool
	shared                  bool
	shmSend, shmRecv        string
}

func parseLabel(via string) label {
	parts := strings.Split(via, "/")
	lb := label{transport: parts[0], dev: -1, proxy: -1}
	switch lb.transport {
	case "P2P":
		if len(parts) > 1 {
			lb.kind = parts[1]
		}
		for _, p := range after(parts, 2) {
			lb.read = lb.read || p == "read"
			lb.ce = lb.ce || p == "CE"
		}
	case "SHM":
		if len(parts) == 3 {
			lb.shmSend, lb.shmRecv = parts[1], parts[2]
		}
	case "NET":
		if len(parts) > 1 {
			lb.plugin = parts[1]
		}
		if len(parts) > 2 {
			d, proxy, _ := strings.Cut(parts[2], "(")
			lb.dev, _ = strconv.Atoi(d)
			if proxy != "" {
				lb.proxy, _ = strconv.Atoi(strings.TrimSuffix(proxy, ")"))
			}
		}
		for _, p := range after(parts, 3) {
			lb.gdr = lb.gdr || strings.HasPrefix(p, "GDRDMA")
			lb.pci = lb.pci || strings.HasSuffix(p, "(PCI)")
			lb.shared = lb.shared || p == "Shared"
		}
	}
	return lb
}

// after is parts[i:], empty when there are fewer.
func after(parts []string, i int) []string {
	if len(parts) <= i {
		return nil
	}
	return parts[i:]
}

// explainChannel fills in the group's explanation and the comparison.
func (x *explainer) explainChannel(g *ChannelGroup) {
	lb := parseLabel(g.Via)
	g.Transport = lb.transport
	g.Agrees = "not compared"
	switch lb.transport {
	case "NET":
		x.explainNet(g, lb)
	case "P2P", "SHM":
		x.explainLocal(g, lb)
	default:
		g.Why = "a transport p2pcheck does not explain (" + lb.transport + ")"
	}
}

// explainNet explains a network connection: between hosts, or inside one.
func (x *explainer) explainNet(g *ChannelGroup, lb label) {
	rules := []string{ruleNetSendLabel, ruleCheckGdr}
	if g.Side == "receive" {
		rules[0] = ruleNetRecvLabel
	}
	var why []string
	switch x.sameHost(g.From, g.To) {
	case "no":
		why = append(why, fmt.Sprintf("ranks %d and %d are on different hosts (%s, %s): P2P and SHM connect only ranks of one host (their host hashes differ), so the network carries it", g.From, g.To, x.hostOf[g.From], x.hostOf[g.To]))
		rules = append(rules, ruleCheckP2P, ruleSHMCanConnect, ruleHostHash)
	case "yes":
		if p := x.pairPrediction(g); p != nil {
			why = append(why, p.Why)
			rules = append(rules, p.Rules...)
			g.Changes = p.Changes
		} else {
			why = append(why, "both ranks are on one host and neither P2P nor SHM connected them (ncclTopoCheckNet preferred the network, or both were off); the log printed no topology to say which")
		}
	default:
		why = append(why, "the log does not say whether the ranks share a host (no host:pid prefix, no NCCL_HOSTID): between hosts only the network connects ranks")
	}
	why = append(why, x.netDetail(g, lb)...)
	g.Why = strings.Join(why, "; ")
	g.Rules = cites(rules, x.v)
	x.compareNet(g, lb)
}

// netDetail explains the label's parts after NET/<plugin>/<dev>.
func (x *explainer) netDetail(g *ChannelGroup, lb label) []string {
	var out []string
	if lb.proxy >= 0 {
		out = append(out, fmt.Sprintf("sent through rank %d's NIC (PXN, not modelled)", lb.proxy))
	}
	if lb.gdr {
		out = append(out, "GPUDirect RDMA: ncclTopoCheckGdr allowed it for this GPU and NIC")
		if lb.pci {
			out = append(out, "(PCI): the GPU reaches its CPU over C2C but the NIC over PCIe, so GPU memory is mapped through PCIe")
		}
	} else {
		out = append(out, "no GPUDirect RDMA: "+x.noGDRWhy(g, lb))
	}
	if lb.shared {
		out = append(out, "/Shared: the connection shares its buffers with others (NCCL_NET_SHARED_BUFFERS, point-to-point operations)")
	}
	return out
}

// noGDRWhy says why a network connection went without GPUDirect RDMA, from the
// log's own lines, else the prediction.
func (x *explainer) noGDRWhy(g *ChannelGroup, lb label) string {
	rank := g.From
	if g.Side == "receive" {
		rank = g.To
	}
	host := x.hostOf[rank]
	for _, d := range x.l.GDR {
		if d.GPU < 0 && d.HCA == lb.dev && !d.Enabled && (d.Host == host || host == "") {
			return "the network device does not support it (\"" + d.Text + "\")"
		}
		if r, ok := x.gdrRank(d); ok && r == rank && !d.Enabled && x.gdrDev(d) == lb.dev {
			return "\"" + d.Text + "\""
		}
	}
	if gn := x.gpuNet(rank, lb.dev); gn != nil {
		return gn.Why
	}
	if lb.plugin == "Socket" {
		return "the Socket transport moves data through host memory only (it reports NCCL_PTR_HOST alone)"
	}
	return "the log does not say why (NCCL_DEBUG_SUBSYS=NET or GRAPH prints its GPU Direct RDMA lines)"
}

// gdrRank is the rank of a GPU line's GPU: printed from 2.25, a bus ID before
// (ncclTopoCheckGdr's INFO line).
func (x *explainer) gdrRank(d GDRLine) (int, bool) {
	if x.v.AtLeast(2, 25) {
		r, err := strconv.Atoi(d.GPUField)
		return r, err == nil
	}
	for _, r := range x.l.Ranks {
		if r.Host == d.Host && strings.EqualFold(strings.TrimLeft(r.BusID, "0"), strings.TrimLeft(d.GPUField, "0")) {
			return r.Rank, true
		}
	}
	return 0, false
}

// gdrDev is the network device of a GPU line: its index before 2.21, its NET
// node's id in hexadecimal from 2.21.
func (x *explainer) gdrDev(d GDRLine) int {
	if !x.v.AtLeast(2, 21) {
		n, err := strconv.Atoi(d.HCAField)
		if err != nil {
			return -1
		}
		return n
	}
	v, err := strconv.ParseUint(d.HCAField, 16, 64)
	if err != nil {
		return -1
	}
	return int(v & 0x00ffffffffffffff)
}

// gpuNet returns the predicted GPUDirect RDMA between rank's GPU and dev.
func (x *explainer) gpuNet(rank, dev int) *GPUNet {
	p := x.prediction(rank)
	if p == nil {
		return nil
	}
	for i, gn := range p.GPUNets {
		if gn.GPU == rank && gn.Net == dev {
			return &p.GPUNets[i]
		}
	}
	return nil
}

// compareNet predicts the network label: the plugin, the device NCCL chose (the
// graph search that chooses it is not modelled), and GPUDirect RDMA for the side.
func (x *explainer) compareNet(g *ChannelGroup, lb label) {
	rank := g.From
	if g.Side == "receive" {
		rank = g.To
	}
	gn := x.gpuNet(rank, lb.dev)
	if gn == nil || g.Side == "" {
		return
	}
	p := x.prediction(rank)
	gdr := gn.Send
	if g.Side == "receive" {
		gdr = gn.Recv
	}
	pred := "NET/" + p.pluginOf(lb.dev) + "/" + strconv.Itoa(lb.dev)
	if lb.proxy >= 0 {
		pred = "NET/" + p.pluginOf(lb.dev) + "/" + strconv.Itoa(lb.dev) + "(" + strconv.Itoa(lb.proxy) + ")"
	}
	switch gdr {
	case "yes":
		pred += "/GDRDMA"
		if gn.Mode == "PCI" {
			pred += "(PCI)"
		}
	case "unknown":
		pred += " (GPUDirect RDMA unknown: " + gn.Why + ")"
	}
	if lb.shared {
		pred += "/Shared"
	}
	g.Predicted = pred
	g.Agrees = agree(g.Via == pred, gdr == "unknown")
	if len(g.Changes) == 0 {
		g.Changes = gn.Changes
	}
}

func agree(same, unknown bool) string {
	switch {
	case unknown:
		return "not compared"
	case same:
		return "yes"
	}
	return "no"
}

func (r *Report) pluginOf(dev int) string {
	for _, n := range r.Nets {
		if n.Dev == dev && n.Plugin != "" {
			return n.Plugin
		}
	}
	return "?"
}

// pairPrediction is the predicted pair for a group, nil when not predicted.
func (x *explainer) pairPrediction(g *ChannelGroup) *GPUPair {
	p := x.prediction(g.From)
	if p == nil || x.prediction(g.To) != p {
		return nil
	}
	for i, q := range p.GPUPairs {
		if q.From == g.From && q.To == g.To {
			return &p.GPUPairs[i]
		}
	}
	return nil
}

// explainLocal explains P2P and SHM, which connect ranks of one host.
func (x *explainer) explainLocal(g *ChannelGroup, lb label) {
	q := x.pairPrediction(g)
	var why []string
	rules := []string{ruleSelect}
	if q != nil {
		why = append(why, q.Why)
		rules = append(rules, q.Rules...)
		g.Changes, g.Predicted = q.Changes, q.Via
	} else if lb.transport == "P2P" {
		why = append(why, "P2P: the GPUs' path is within the P2P level (ncclTopoCheckP2p); the log printed no topology of their host to say which path")
		rules = append(rules, ruleP2PCanConnect, ruleCheckP2P)
	} else {
		why = append(why, "SHM: P2P could not connect the ranks (their path is beyond the P2P level, or P2P is off) and they share a host (shmCanConnect); the log printed no topology of their host to say which")
		rules = append(rules, ruleP2PCanConnect, ruleCheckP2P, ruleSHMCanConnect)
	}
	why = append(why, labelDetail(lb)...)
	g.Why, g.Rules = strings.Join(why, "; "), cites(rules, x.v)
	if q == nil {
		return
	}
	// NCCL prints P2P/direct pointer for ranks of one process, which the
	// prediction (ranks in separate processes) does not model.
	g.Agrees = agree(g.Via == q.Via, q.Transport == "unknown" || lb.kind == "direct pointer")
}

// labelDetail explains a P2P or SHM label's parts.
func labelDetail(lb label) []string {
	var out []string
	switch lb.kind {
	case "CUMEM":
		out = append(out, "CUMEM: buffers are cuMem allocations (ncclCuMemEnable: NCCL_CUMEM_ENABLE, on by default from 2.19 where the driver has the API)")
	case "IPC":
		out = append(out, "IPC: buffers are shared with CUDA IPC (cuMem off: NCCL_CUMEM_ENABLE=0, a release before 2.19 or a driver without the API)")
	case "direct pointer":
		out = append(out, "direct pointer: both ranks are in one process (P2P_SAME_PID)")
	case "MNNVL":
		out = append(out, "MNNVL: multi-node NVLink, not modelled")
	case "indirect":
		out = append(out, "indirect: through an intermediate GPU (a two-hop NVLink path)")
	}
	if lb.read {
		out = append(out, "read: the receiver reads (NVLink between two compute capability 8.0 GPUs, or NCCL_P2P_READ_ENABLE=1)")
	}
	if lb.ce {
		out = append(out, "CE: copies go through the copy engine (NCCL_P2P_USE_CUDA_MEMCPY=1)")
	}
	if lb.shmSend == "CE" || lb.shmRecv == "CE" {
		out = append(out, "CE: SHM copies through the copy engine (NCCL_SHM_USE_CUDA_MEMCPY with NCCL_SHM_MEMCPY_MODE)")
	}
	return out
}

// disagreeWhy explains a channel's disagreement where a known cause does.
func disagreeWhy(g *ChannelGroup) string {
	lb := parseLabel(g.Via)
	switch {
	case lb.proxy >= 0:
		return "NCCL sent through another rank's NIC (PXN), which p2pcheck does not model"
	case lb.kind == "MNNVL":
		return "multi-node NVLink, which p2pcheck does not model"
	}
	return "not explained by a rule p2pcheck knows: a defect of the prediction, or a fact of the machine not in its input"
}
