package nccl

import (
	"bufio"
	"errors"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Log is what NCCL_DEBUG=INFO logs of one or more ranks say: the decisions
// Predict makes and the facts they rest on. Every line is accounted for: a line
// is a decision or a fact read here, a line NCCL prints that carries neither
// (counted), or a line not understood (kept, up to maxUnknown, and counted), which
// is never guessed at.
type Log struct {
	// Version is the release from the "NCCL version 2.28.9+cuda13.0" line, and
	// Versions every release the ranks printed when they differ.
	Version  Version
	Versions []Version
	// Paths are the path lines (printNodePaths in src/graph/paths.cc) without the
	// prefix and trailing space, in order, each once; HostPaths by host.
	Paths     []string
	HostPaths map[string][]string
	// Systems holds, by host, the first topology NCCL printed there
	// (ncclTopoPrint: the lines between "=== System" and "====").
	Systems map[string][]string
	// Channels are the transport lines, one per connection.
	Channels []Channel
	// NetGDR maps each network device name to its GPUDirect RDMA support from the
	// "NET/<plugin> : GPU Direct RDMA Enabled|Disabled for HCA <dev> '<name>'" lines
	// (ncclTopoPopulateNics in src/graph/topo.cc); GDR holds those lines and the
	// per-GPU ones of ncclTopoCheckGdr, each once.
	NetGDR map[string]bool
	GDR    []GDRLine
	// GDRCopy reports a "GDRCOPY enabled library ..." line (ncclGdrInit), with the
	// line itself.
	GDRCopy     bool
	GDRCopyLine string
	// Settings maps each parameter NCCL reported reading ("NCCL_X set by
	// environment to V", ncclLoadParam in src/misc/param.cc and ncclGetLevel in
	// src/graph/paths.cc; values from configuration files are reported the same way)
	// to its value.
	Settings map[string]string
	// Plugin is the network plugin of "Using network <name>".
	Plugin string
	// Ranks are the ranks of the "ncclCommInitRank... Init START" lines, with the
	// host each ran on; Comms the "comm ... nNodes N localRanks L" summaries.
	Ranks []Rank
	Comms []CommInfo
	// Warnings are NCCL's WARN lines, each once, up to maxUnknown.
	Warnings []string
	// Prefixed is set when lines carried NCCL's host:pid:tid prefix, which says
	// which host printed them.
	Prefixed bool
	// Lines counts the NCCL lines read, Other those NCCL prints that carry no
	// decision p2pcheck explains, Skipped the lines longer than maxLogLine.
	Lines, Other, Skipped int
	// Unknown holds the lines not understood, each once, up to maxUnknown, and
	// UnknownCount all of them.
	Unknown      []string
	UnknownCount int

	procs map[string]*proc
	order []*proc
}

// Channel is one "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM" line: the sending and
// receiving ranks, what follows "via", the channel, whether the network line was
// the [send] or the [receive] side, and the host of the process that printed it.
type Channel struct {
	From, To int
	Via      string
	ID       int
	Side     string
	Host     string
}

// GDRLine is a GPU Direct RDMA line: a network device's support (NIC, from
// ncclTopoPopulateNics) or a GPU and network device's decision (from
// ncclTopoCheckGdr, at NCCL_DEBUG_SUBSYS=GRAPH or NET).
type GDRLine struct {
	Text    string
	Enabled bool
	// NIC line: the plugin, device index and name.
	Plugin string
	HCA    int
	Name   string
	// GPU line (GPU is -1 for a NIC line): the GPU and the network device as the
	// release prints them (a bus ID before 2.25, then the rank; the device index
	// before 2.21, then the NET node's id, in hexadecimal), the distance and level
	// in the release's path numbering, whether it was the read (send) side, and
	// the mode.
	GPU             int
	GPUField        string
	HCAField        string
	Distance, Level int
	Read            int
	Mode            string
	Host            string
}

// Rank is one rank's "Init START" line.
type Rank struct {
	Rank, NRanks, CudaDev, NvmlDev int
	BusID, Comm, Host              string
}

// CommInfo is the "comm 0x... rank R nRanks N nNodes M localRanks L" line.
type CommInfo struct {
	Comm                             string
	Rank, NRanks, NNodes, LocalRanks int
	Host                             string
}

// proc is what the parser knows of one process printing: its host (NCCL_HOSTID
// when printed, NCCL's host hash key, else the prefix's host name), and whether
// it is inside a topology print.
type proc struct {
	host     string
	token    string
	inSystem bool
	// current is the topology being printed, system the first printed whole.
	current, system []string
	paths           []string
}

// Bounds of what ParseLogs keeps.
const (
	maxLogLine = 64 << 10
	maxUnknown = 100
	maxKept    = 1 << 16 // channels, ranks, GDR lines
)

// lazyRegexp returns a function that compiles expr on its first call: compiled at
// package init, this package's expressions would cost every p2pcheck command about
// 3 ms, whether it reads an NCCL log or not.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

var (
	prefixRE      = lazyRegexp(`(?:^|\s)([^\s:]+):(\d+):(\d+) \[\d+\] (?:\S+ )?NCCL (?:INFO|WARN) `)
	pathLine      = lazyRegexp(`^(GPU|NET)/[0-9a-fA-F]{1,16}(?:-[0-9a-f]{1,16})? :.*\)$`)
	channelLine   = lazyRegexp(`^Channel (\d+)(?:/\d+)? : (\d+)\[[0-9a-f]+\] -> (\d+)\[[0-9a-f]+\] (?:\[(send|receive)\] )?via (\S+(?: pointer\S*)?)$`)
	setLine       = lazyRegexp(`^(NCCL_[A-Z0-9_]+) set by environment to (.*?)\.?$`)
	gdrNICLine    = lazyRegexp(`^NET/(\S+) : GPU Direct RDMA (Enabled|Disabled) for HCA (\d+) '([^']*)'`)
	gdrGPULine    = lazyRegexp(`^GPU Direct RDMA (Enabled|Disabled) for GPU ([0-9a-fA-F]+) / HCA ([0-9a-fA-F]+) \(distance (\d+) (?:>|<=) (\d+)\)(?:, read (\d+)(?: mode (\S+))?)?$`)
	initLine      = lazyRegexp(`^ncclCommInitRank\S* comm (0x[0-9a-f]+) rank (\d+) nranks (\d+) cudaDev (\d+) nvmlDev (\d+) busId ([0-9a-f]+) .*Init START`)
	commLine      = lazyRegexp(`^comm (0x[0-9a-f]+) rank (\d+) nRanks (\d+) nNodes (\d+) localRanks (\d+) localRank \d+`)
	usingLine     = lazyRegexp(`^Using network (\S+)`)
	gdrcopyLine   = lazyRegexp(`^GDRCOPY enabled library \d+\.\d+ driver \d+\.\d+`)
	versionLine   = lazyRegexp(`^NCCL version (\S+)`)
	systemLine    = lazyRegexp(`^=== System : `)
	systemEndLine = lazyRegexp(`^=+$`)
)

// otherLines are lines NCCL 2.18 to 2.30 prints that carry no decision p2pcheck
// explains: plugins found or not, bootstrap, affinity, the graph search, rings
// and trees, buffer sizes, proxies, timings. A line none of them matches, and no
// decision or fact matches, is not understood.
var otherLines = lazyRegexp(`^(?:` + strings.Join([]string{
	`cudaDriverVersion \d+$`, `Bootstrap ?: `, `(?:NET|ENV|PROFILER|TUNER|GIN)/Plugin\b`, `NET/IB : `, `NET/Socket : Using `,
	`Failed to initialize NET plugin`, `Initialized NET plugin`, `Assigned NET plugin`, `Comm config `,
	`dlvsym failed on `, `RAS client listening`, `Topology detection`, `TOPO/NET : `, `Could not get speed from`,
	`ncclTopoPopulateNics : Filled`, `ncclTopoGetCpuAffinity: `, `Setting affinity for GPU`, `Pattern \d+, crossNic`,
	`\s*\d+ : (?:NET|GPU)/`, `Tree \d+ : `, `Ring \d+ : `, `Trees \[`, `Channel \d+/\d+ :(?:\s+\d+)+$`,
	`P2P Chunksize set to`, `Check P2P Type `, `ncclP2pSchedule: `, `\[Proxy Service`, `\d+ coll channels, `,
	`CC (?:Off|On), `, `Init timings`, `.* - Init COMPLETE$`, `.* - Destroy COMPLETE$`, `Connected all (?:rings|trees)`,
	`threadThresholds `, `NVLS multicast support`, `Using non-device net plugin`, `Enabled NCCL Func`,
	`Channel \d+/\d+ : \d+\[\d+\] -> \d+\[\d+\] via COLLNET`, `CollNet \d+/\d+ : `, `\S+\.(?:cc|h):\d+ -> \d+`,
	`Loading (?:unnamed )?topology`, `Ignoring element`, `NCCL_\w+ set by environment to`, `New proxy (?:recv|send) connection`,
	`Connected to proxy localRank`, `\[Proxy Progress\]`, `Bootstrap timings`,
}, "|") + `)`)

// ParseLog reads one log (see ParseLogs).
func ParseLog(r io.Reader) (*Log, error) {
	return ParseLogs([]LogSource{{Name: "log", R: r}})
}

// LogSource is one log to read and the name it is reported by.
type LogSource struct {
	Name string
	R    io.Reader
}

// ParseLogs reads NCCL INFO and WARN lines of one or more logs, with or without
// the "host:pid:tid [dev] " prefix NCCL puts before "NCCL INFO". Lines without
// "NCCL INFO" or "NCCL WARN" (the job's own output) are not NCCL's and are
// skipped. Without prefixes, each source is taken as one process on one host.
func ParseLogs(srcs []LogSource) (*Log, error) {
	l := &Log{NetGDR: map[string]bool{}, Settings: map[string]string{}, HostPaths: map[string][]string{},
		Systems: map[string][]string{}, procs: map[string]*proc{}}
	for _, src := range srcs {
		if err := l.read(src); err != nil {
			return nil, err
		}
	}
	l.resolveHosts()
	return l, nil
}

// resolveHosts names each process's host in what it printed. While reading, a
// process stands for its host: a process that prints NCCL_HOSTID after its
// first lines (NCCL reads it when it first hashes the host) moves to that host.
func (l *Log) resolveHosts() {
	host := map[string]string{}
	for _, p := range l.order {
		host[p.token] = p.host
		if _, ok := l.Systems[p.host]; !ok && p.system != nil {
			l.Systems[p.host] = p.system
		}
		for _, x := range p.paths {
			if hp := l.HostPaths[p.host]; !slices.Contains(hp, x) {
				l.HostPaths[p.host] = append(hp, x)
			}
		}
	}
	for i := range l.Channels {
		l.Channels[i].Host = host[l.Channels[i].Host]
	}
	for i := range l.Ranks {
		l.Ranks[i].Host = host[l.Ranks[i].Host]
	}
	for i := range l.Comms {
		l.Comms[i].Host = host[l.Comms[i].Host]
	}
	for i := range l.GDR {
		l.GDR[i].Host = host[l.GDR[i].Host]
	}
	l.procs, l.order = nil, nil
}

func (l *Log) read(src LogSource) error {
	sc := bufio.NewScanner(src.R)
	sc.Buffer(make([]byte, 0, 4096), maxLogLine)
	for {
		if !sc.Scan() {
			err := sc.Err()
			if !errors.Is(err, bufio.ErrTooLong) {
				return err
			}
			// A line longer than maxLogLine: skip it and go on after it.
			l.Skipped++
			sc = bufio.NewScanner(skipLine(src.R))
			sc.Buffer(make([]byte, 0, 4096), maxLogLine)
			continue
		}
		l.line(src.Name, sc.Text())
	}
}

// skipLine returns r after the rest of the current line.
func skipLine(r io.Reader) io.Reader {
	br := bufio.NewReader(r)
	for {
		if _, err := br.ReadSlice('\n'); err != bufio.ErrBufferFull {
			return br
		}
	}
}

// line reads one line of source src.
func (l *Log) line(src, raw string) {
	i := strings.Index(raw, "NCCL INFO ")
	warn := false
	if i < 0 {
		if i = strings.Index(raw, "NCCL WARN "); i < 0 {
			return
		}
		warn = true
	}
	l.Lines++
	key, host := src, src
	if m := prefixRE().FindStringSubmatch(raw[:i+10]); m != nil {
		key, host = src+"\x00"+m[1]+":"+m[2], m[1]
		l.Prefixed = true
	}
	p := l.procs[key]
	if p == nil {
		p = &proc{host: host, token: "\x00" + strconv.Itoa(len(l.order))}
		l.procs[key] = p
		l.order = append(l.order, p)
	}
	text := strings.TrimRight(raw[i+10:], " \r")
	if warn {
		l.keepOnce(&l.Warnings, text)
		return
	}
	if p.inSystem {
		l.systemLine(p, text)
		return
	}
	if !l.fact(p, text) && !l.decision(p, text) {
		if otherLines().MatchString(text) {
			l.Other++
			return
		}
		l.UnknownCount++
		l.keepOnce(&l.Unknown, text)
	}
}

func (l *Log) keepOnce(list *[]string, s string) {
	if len(*list) < maxUnknown && !slices.Contains(*list, s) {
		*list = append(*list, s)
	}
}

// systemLine keeps the lines of a topology print, the first of each host.
func (l *Log) systemLine(p *proc, text string) {
	if systemEndLine().MatchString(text) {
		p.inSystem = false
		if p.system == nil {
			p.system = p.current
		}
		p.current = nil
		return
	}
	if len(p.current) < maxKept {
		p.current = append(p.current, text)
	}
}

// fact reads the lines that say what the decisions rest on.
func (l *Log) fact(p *proc, text string) bool {
	switch {
	case versionLine().MatchString(text):
		if v, err := ParseVersion(versionLine().FindStringSubmatch(text)[1]); err == nil {
			if l.Version.IsZero() {
				l.Version = v
			}
			if !slices.Contains(l.Versions, v) {
				l.Versions = append(l.Versions, v)
			}
		}
	case setLine().MatchString(text):
		m := setLine().FindStringSubmatch(text)
		if _, ok := l.Settings[m[1]]; !ok && len(l.Settings) < maxKept {
			l.Settings[m[1]] = m[2]
		}
		if m[1] == "NCCL_HOSTID" {
			// NCCL's host hash is of NCCL_HOSTID when set (getHostHash).
			p.host = "NCCL_HOSTID=" + m[2]
		}
	case systemLine().MatchString(text):
		p.inSystem, p.current = true, []string{text}
	case pathLine().MatchString(text):
		if !slices.Contains(l.Paths, text) && len(l.Paths) < maxKept {
			l.Paths = append(l.Paths, text)
		}
		if !slices.Contains(p.paths, text) && len(p.paths) < maxKept {
			p.paths = append(p.paths, text)
		}
	case usingLine().MatchString(text):
		l.Plugin = usingLine().FindStringSubmatch(text)[1]
	case initLine().MatchString(text):
		m := initLine().FindStringSubmatch(text)
		r := Rank{Comm: m[1], Rank: atoi(m[2]), NRanks: atoi(m[3]), CudaDev: atoi(m[4]), NvmlDev: atoi(m[5]), BusID: m[6], Host: p.token}
		if !slices.Contains(l.Ranks, r) && len(l.Ranks) < maxKept {
			l.Ranks = append(l.Ranks, r)
		}
	case commLine().MatchString(text):
		m := commLine().FindStringSubmatch(text)
		c := CommInfo{Comm: m[1], Rank: atoi(m[2]), NRanks: atoi(m[3]), NNodes: atoi(m[4]), LocalRanks: atoi(m[5]), Host: p.token}
		if !slices.Contains(l.Comms, c) && len(l.Comms) < maxKept {
			l.Comms = append(l.Comms, c)
		}
	default:
		return false
	}
	return true
}

// decision reads the lines that give a decision: channels and their transports,
// GPU Direct RDMA, GDRCopy.
func (l *Log) decision(p *proc, text string) bool {
	switch {
	case channelLine().MatchString(text):
		m := channelLine().FindStringSubmatch(text)
		if len(l.Channels) < maxKept*16 {
			l.Channels = append(l.Channels, Channel{ID: atoi(m[1]), From: atoi(m[2]), To: atoi(m[3]), Side: m[4], Via: m[5], Host: p.token})
		}
	case gdrNICLine().MatchString(text):
		m := gdrNICLine().FindStringSubmatch(text)
		l.NetGDR[m[4]] = m[2] == "Enabled"
		l.addGDR(GDRLine{Text: text, Enabled: m[2] == "Enabled", Plugin: m[1], HCA: atoi(m[3]), Name: m[4], GPU: -1, Host: p.token})
	case gdrGPULine().MatchString(text):
		m := gdrGPULine().FindStringSubmatch(text)
		g := GDRLine{Text: text, Enabled: m[1] == "Enabled", GPU: 0, GPUField: m[2], HCAField: m[3], Distance: atoi(m[4]), Level: atoi(m[5]), HCA: -1, Read: -1, Mode: m[7], Host: p.token}
		if m[6] != "" {
			g.Read, _ = strconv.Atoi(m[6])
		}
		l.addGDR(g)
	case gdrcopyLine().MatchString(text):
		l.GDRCopy, l.GDRCopyLine = true, text
	default:
		return false
	}
	return true
}

func (l *Log) addGDR(g GDRLine) {
	if !slices.Contains(l.GDR, g) && len(l.GDR) < maxKept {
		l.GDR = append(l.GDR, g)
	}
}
