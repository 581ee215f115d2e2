package nccl

import (
	"fmt"
	"slices"
	"strconv"
)

// LogSettings are the settings a log shows NCCL read ("set by environment to"),
// with --assume's values over them.
func LogSettings(l *Log, assume map[string]string) Settings {
	env := map[string]string{}
	for k, v := range l.Settings {
		env[k] = v
	}
	s := ResolveSettings(assume, nil, nil)
	for k, v := range env {
		if _, ok := s.Get(k); !ok {
			s = s.With(k, v, "the log")
		}
	}
	return s
}

// Hosts returns the hosts the log's processes ran on, ordered by their first
// rank, then those that printed a topology and no rank, by name. A host is
// NCCL_HOSTID's value when a process printed it (NCCL hashes that instead of the
// host name), else the prefix's host name, else the log's name.
func (l *Log) Hosts() []string {
	var hosts []string
	ranks := slices.Clone(l.Ranks)
	slices.SortStableFunc(ranks, func(a, b Rank) int { return a.Rank - b.Rank })
	for _, r := range ranks {
		if !slices.Contains(hosts, r.Host) {
			hosts = append(hosts, r.Host)
		}
	}
	var rest []string
	for h := range l.Systems {
		if !slices.Contains(hosts, h) {
			rest = append(rest, h)
		}
	}
	slices.Sort(rest)
	return append(hosts, rest...)
}

// LogInput prepares the prediction for the topology the log printed on host
// (NCCL_DEBUG_SUBSYS=GRAPH), under the settings the log shows and assume. What
// NCCL does not print is unknown and said so in the decisions it changes: the
// GPUs' compute capability (taken as below 8.0, else 8.0), their GPUDirect RDMA
// support (taken as none, else supported), a network device's where no "GPU
// Direct RDMA ... for HCA" line gave it.
func LogInput(l *Log, host string, assume map[string]string, v Version, versionSource string) (Input, error) {
	lines, ok := l.Systems[host]
	if !ok {
		return Input{}, fmt.Errorf("nccl: the log printed no topology for %s (NCCL_DEBUG_SUBSYS=GRAPH prints it)", host)
	}
	t, err := parsePrinted(lines)
	if err != nil {
		return Input{}, err
	}
	for _, g := range l.GDR {
		if g.GPU < 0 && g.Host == host {
			t.gdrNet[g.HCA], t.names[g.HCA] = g.Enabled, g.Name
		}
	}
	for _, r := range l.Ranks {
		if r.Host == host {
			if b, err := strconv.ParseUint(r.BusID, 16, 56); err == nil {
				t.dev[int64(b)] = r.NvmlDev
			}
		}
	}
	in := Input{printed: t, Settings: LogSettings(l, assume), Version: v, VersionSource: versionSource,
		Facts: Facts{NetPlugin: l.Plugin}, Nets: []Net{}}
	sys, err := t.build(v)
	if err != nil {
		return Input{}, err
	}
	for _, n := range sys.nodes[nodeNET] {
		net := Net{Dev: n.netDev, Name: n.netName, Plugin: l.Plugin, GDR: "unknown", Why: "the log printed no GPU Direct RDMA line for it"}
		if g, ok := t.gdrNet[n.netDev]; ok {
			net.GDR, net.Why = yesNo(g), "NCCL printed GPU Direct RDMA "+map[bool]string{true: "Enabled", false: "Disabled"}[g]+" for it (ncclTopoPopulateNics)"
		}
		in.Nets = append(in.Nets, net)
	}
	in.Unknowns = logUnknowns(t, sys)
	in.Notes = append(in.Notes, "the topology is the one NCCL printed on "+host+": bandwidths with one decimal, as printed; the PCI bus IDs of switches are not printed")
	return in, nil
}

// logUnknowns are the alternatives of a printed topology.
func logUnknowns(t *printedTopo, sys *System) []Unknown {
	var out []Unknown
	if len(sys.nodes[nodeGPU]) > 0 {
		out = append(out,
			Unknown{Fact: "compute capability 8.0", Why: "NCCL does not print it", tweak: func(s *System) {
				for _, g := range s.nodes[nodeGPU] {
					g.sm = 80
				}
			}},
			Unknown{Fact: "the GPU supports GPUDirect RDMA", Why: "NCCL does not print it", tweak: func(s *System) {
				for _, g := range s.nodes[nodeGPU] {
					g.gdr = 1
				}
			}})
	}
	for _, n := range sys.nodes[nodeNET] {
		if _, ok := t.gdrNet[n.netDev]; ok {
			continue
		}
		dev := n.netDev
		out = append(out, Unknown{Fact: "NET/" + strconv.Itoa(dev) + " supports GPUDirect RDMA", Why: "the log printed no GPU Direct RDMA line for it", tweak: func(s *System) {
			for _, x := range s.nodes[nodeNET] {
				if x.netDev == dev {
					x.netGDR = 1
				}
			}
		}})
	}
	return out
}
