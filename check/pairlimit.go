package check

import (
	"fmt"
	"math"
	"slices"

	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pcie"
)

// maxPairLines bounds the findings and subjects a check lists pair by pair: a node
// of 8,000 GPUs has 32 million pairs. Past it, one finding per status counts the
// pairs not listed.
const maxPairLines = 1000

// pairLines lists per-pair findings and subjects up to maxPairLines each.
type pairLines struct {
	r        *Result
	findings int
	subjects int
	dropped  map[Status]int
}

// finding lists the finding prefix+reason on p; the message is built only when
// listed.
func (l *pairLines) finding(p pair, st Status, prefix, reason string) {
	if l.findings == maxPairLines {
		if l.dropped == nil {
			l.dropped = map[Status]int{}
		}
		l.dropped[st]++
		return
	}
	l.findings++
	l.r.Findings = append(l.r.Findings, Finding{Subject: pairSubject(p), Status: st, Message: prefix + reason})
}

func (l *pairLines) subject(p pair) {
	if l.subjects < maxPairLines {
		l.subjects++
		l.r.Subjects = append(l.r.Subjects, pairSubject(p))
	}
}

// done adds the count of the findings not listed.
func (l *pairLines) done() {
	for _, st := range []Status{Fail, Unknown, Warn, Skip, Pass} {
		if n := l.dropped[st]; n > 0 {
			l.r.Findings = append(l.r.Findings, Finding{Subject: fmt.Sprintf("%d more pairs", n), Status: st,
				Message: fmt.Sprintf("not listed: only the first %d pairs are", maxPairLines)})
		}
	}
}

// Roles of a device in the pairs of interest (see Facts.pairs).
const (
	roleGPU    uint8 = 1 << iota // a GPU or accelerator
	rolePeer                     // a GPU, accelerator, RDMA NIC or NVMe controller
	roleP2PMem                   // a p2pmem provider
)

// roleOf returns d's roles.
func roleOf(d *pcie.Device) uint8 {
	var r uint8
	if d.IsGPU() || d.IsAccelerator() {
		r |= roleGPU | rolePeer
	}
	if isRDMANIC(d) || d.IsNVMe() {
		r |= rolePeer
	}
	if d.P2PMem != nil {
		r |= roleP2PMem
	}
	return r
}

// interesting reports whether devices of roles a and b make a pair of interest: a
// GPU and a peer, or a p2pmem provider and a peer.
func interesting(a, b uint8) bool {
	return a&(roleGPU|roleP2PMem) != 0 && b&rolePeer != 0 || b&(roleGPU|roleP2PMem) != 0 && a&rolePeer != 0
}

// roles returns the roles of f.devices, index for index, decided once: the pair
// loops run over millions of pairs.
func (f *Facts) roles() []uint8 {
	r := make([]uint8, len(f.devices))
	for i, d := range f.devices {
		r[i] = roleOf(d)
	}
	return r
}

// redirected is what acs_path keeps of the pairs a bridge redirects: how many, and
// the first.
type redirected struct {
	n     int
	first string
}

// pairScan is what one pass over the pairs of interest finds for the two checks that
// judge every pair, reachability and acs_path: each pair's kernel verdict is
// computed once for both.
type pairScan struct {
	n          int // pairs
	counts     map[p2pdma.MapType]int
	refusedGPU int    // refused GPU-to-GPU pairs
	reach      Result // reachability's per-pair findings and subjects
	// acs_path: bridge → the pairs it redirects, bridge → its setpci command, the
	// pairs whose ACS state is unknown (the first maxPairLines) and their number.
	bridges      map[pcie.Address]*redirected
	setpci       map[pcie.Address]string
	unknown      []string
	unknownPairs int
}

// scan returns the pairScan of f, made on first use.
func (f *Facts) scan() *pairScan {
	f.scanOnce.Do(func() {
		s := &pairScan{counts: map[p2pdma.MapType]int{}, bridges: map[pcie.Address]*redirected{}, setpci: map[pcie.Address]string{}}
		lines := pairLines{r: &s.reach}
		for p := range f.pairs() {
			s.n++
			v := f.verdict(p)
			s.counts[v.MapType]++
			switch {
			case v.MapType == p2pdma.NotSupported && p.a.IsGPU() && p.b.IsGPU():
				s.refusedGPU++
				lines.finding(p, Pass, "not-supported for kernel P2PDMA (the NVIDIA driver decides GPU P2P): ", v.Reason)
			case v.MapType == p2pdma.NotSupported:
				lines.subject(p)
				lines.finding(p, Warn, "not-supported: ", v.Reason)
			case v.MapType == p2pdma.Unknown:
				lines.finding(p, Skip, "unknown: ", v.Reason)
			}
			if v.Fix != nil {
				for i, a := range v.ACSRedirect {
					if s.bridges[a] == nil {
						s.bridges[a] = &redirected{first: pairSubject(p)}
					}
					s.bridges[a].n++
					s.setpci[a] = v.Fix.Setpci[i]
				}
			}
			if len(v.ACSRedirect) == 0 && len(v.Unknowns) > 0 {
				if s.unknownPairs < maxPairLines {
					s.unknown = append(s.unknown, pairSubject(p))
				}
				s.unknownPairs++
			}
		}
		lines.done()
		f.scanned = s
	})
	return f.scanned
}

// pathDevices returns the devices of interest and every bridge on the paths of
// the pairs of interest, each once, in address order: a device and its ancestors up
// to the common upstream device of a pair, as Topology.Path lists them, without
// building the paths. Per device it keeps the lowest depth any of its pairs climbs
// to, so that marking the chains costs work linear in the devices.
func (f *Facts) pathDevices() []*pcie.Device {
	seen := map[*pcie.Device]bool{}
	for _, d := range f.devices {
		if d.IsGPU() || isRDMANIC(d) || d.IsNVMe() || d.IsAccelerator() {
			seen[d] = true
		}
	}
	// stop[i] is the depth above which f.devices[i]'s chain is on a path: its
	// common device's with some partner, -1 for the whole chain, and unset
	// (MaxInt) while it is in no pair.
	stop := make([]int, len(f.devices))
	for i := range stop {
		stop[i] = math.MaxInt
	}
	roles := f.roles()
	for i, a := range f.devices {
		for j := i + 1; j < len(f.devices); j++ {
			b := f.devices[j]
			if !interesting(roles[i], roles[j]) {
				continue
			}
			common, _, _ := pcie.CommonUpstream(a, b)
			s := -1
			if common != nil {
				s = common.Depth()
				seen[common] = true
			}
			stop[i], stop[j] = min(stop[i], s), min(stop[j], s)
		}
	}
	for i, x := range f.devices {
		for y := x; y != nil && y.Depth() > stop[i]; y = y.Upstream() {
			seen[y] = true
		}
	}
	out := make([]*pcie.Device, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b *pcie.Device) int { return a.Address.Compare(b.Address) })
	return out
}
