package check

import (
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/p2pkit/p2pkit/matrix"
	"github.com/p2pkit/p2pkit/pcie"
)

// role is what a device of interest is to the pairs of interest: the properties
// that decide whether two devices form one and what its path is needed for.
type role uint8

const (
	roleGPU    role = 1 << iota // a GPU or another accelerator
	roleRDMA                    // an RDMA-capable NIC (isRDMANIC)
	roleNVMe                    // an NVMe controller
	roleP2PMem                  // a p2pmem provider
)

// numRoles is the number of roles: every combination of the bits above.
const numRoles = int(roleP2PMem) << 1

// roleOf returns the role of a device of interest: its matrix.RoleOf role
// (GPUs and accelerators pair alike; a NIC counts only when it does RDMA), and
// p2pmem besides, since a GPU or NVMe controller may publish p2pmem too.
func roleOf(d *pcie.Device) role {
	var r role
	primary, _ := matrix.RoleOf(d)
	switch primary {
	case matrix.GPU, matrix.Accelerator:
		r |= roleGPU
	case matrix.NIC:
		if isRDMANIC(d) {
			r |= roleRDMA
		}
	case matrix.NVMe:
		r |= roleNVMe
	}
	if d.P2PMem != nil {
		r |= roleP2PMem
	}
	return r
}

// peer reports whether a device of role r moves data to or from a GPU or a
// p2pmem provider: a GPU, an RDMA NIC or an NVMe controller.
func (r role) peer() bool { return r&(roleGPU|roleRDMA|roleNVMe) != 0 }

// pairsWith reports whether devices of roles r and o form a pair whose
// peer-to-peer path matters: GPU↔GPU, GPU↔RDMA NIC, GPU↔NVMe and p2pmem
// provider↔GPU/NIC/NVMe.
func (r role) pairsWith(o role) bool {
	switch {
	case r&roleGPU != 0 && o.peer(), o&roleGPU != 0 && r.peer():
		return true
	case r&roleP2PMem != 0 && o.peer(), o&roleP2PMem != 0 && r.peer():
		return true
	}
	return false
}

// pairCap returns the capability a problem on the path between devices of
// roles r and o stands in the way of: a pair with an NVMe controller or a
// p2pmem provider is nvme-p2p, GPU to GPU is p2p, GPU to RDMA NIC is gdr.
func (r role) pairCap(o role) Capability {
	switch {
	case (r|o)&(roleNVMe|roleP2PMem) != 0:
		return CapNVMeP2P
	case r&o&roleGPU != 0:
		return CapP2P
	}
	return CapGDR
}

// pair is an unordered pair of devices of interest, with their roles and their
// indices in Facts.devices (i < j).
type pair struct {
	a, b   *pcie.Device
	ra, rb role
	i, j   int
}

// blocks returns the capability a problem on p's path stands in the way of.
func (p pair) blocks() Capability { return p.ra.pairCap(p.rb) }

// pairs yields the pairs whose peer-to-peer path matters (role.pairsWith), each
// once, in address order. They are yielded, never collected: a node of 8,000
// GPUs has 32 million of them.
func (f *Facts) pairs() iter.Seq[pair] {
	return func(yield func(pair) bool) {
		for i, a := range f.devices {
			ra := f.roles[i]
			for j := i + 1; j < len(f.devices); j++ {
				if rb := f.roles[j]; ra.pairsWith(rb) && !yield(pair{a, f.devices[j], ra, rb, i, j}) {
					return
				}
			}
		}
	}
}

// maxPairLines bounds the findings and the subjects a check lists pair by
// pair; one more finding counts the pairs it did not list.
const maxPairLines = 1000

// pairLines collects a check's per-pair findings and subjects up to
// maxPairLines each. A check that judges classes of pairs (pairClass) counts
// every finding in total, and lists the first ones pair by pair.
type pairLines struct {
	findings  []Finding
	subjects  []string
	notListed [len(listOrder)]int // findings past the bound, by status in listOrder

	total    [len(listOrder)]int // findings of each status, listed or not
	subjectN int                 // subjects, listed or not
}

// count records n findings of status st ("" for none) and, with subject, n
// subjects, to be listed by finding and subject as far as the bound allows.
func (l *pairLines) count(st Status, subject bool, n int) {
	if i := slices.Index(listOrder[:], st); i >= 0 {
		l.total[i] += n
	}
	if subject {
		l.subjectN += n
	}
}

// open reports whether findings or subjects counted remain to be listed.
func (l *pairLines) open() (findings, subjects bool) {
	listed := 0
	for i := range listOrder {
		listed += l.total[i]
	}
	return len(l.findings) < min(maxPairLines, listed), len(l.subjects) < min(maxPairLines, l.subjectN)
}

// settle makes the findings not listed those counted less those listed.
func (l *pairLines) settle() {
	listed := [len(listOrder)]int{}
	for _, f := range l.findings {
		if i := slices.Index(listOrder[:], f.Status); i >= 0 {
			listed[i]++
		}
	}
	for i := range listOrder {
		l.notListed[i] = l.total[i] - listed[i]
	}
}

// listOrder is the order in which the finding that counts the pairs not listed
// gives their statuses.
var listOrder = [...]Status{Fail, Unknown, Warn, Skip, Pass}

// finding lists a finding of status st on p whose message is the parts of msg
// joined, made only when it is listed.
func (l *pairLines) finding(p pair, st Status, msg ...string) {
	if len(l.findings) == maxPairLines {
		if i := slices.Index(listOrder[:], st); i >= 0 {
			l.notListed[i]++
		}
		return
	}
	l.findings = append(l.findings, Finding{Subject: pairSubject(p), Status: st, Message: strings.Join(msg, "")})
}

// subject lists p as a subject.
func (l *pairLines) subject(p pair) {
	if len(l.subjects) < maxPairLines {
		l.subjects = append(l.subjects, pairSubject(p))
	}
}

// listFindings appends the findings listed to r, then one that counts, by
// status, those that were not; its status is the worst of theirs.
func (l *pairLines) listFindings(r *Result) {
	r.Findings = append(r.Findings, l.findings...)
	worst, total := Pass, 0
	var by []string
	for i, st := range listOrder {
		if n := l.notListed[i]; n > 0 {
			worst, total = worse(worst, st), total+n
			by = append(by, fmt.Sprintf("%d %s", n, st))
		}
	}
	if total == 0 {
		return
	}
	r.Findings = append(r.Findings, Finding{Subject: "other pairs", Status: worst,
		Message: fmt.Sprintf("%d more pair(s) not listed (%s): only the first %d are", total, strings.Join(by, ", "), maxPairLines)})
}

// pairScan is what judging the pairs of interest finds for the two checks that
// judge every pair's kernel verdict, p2p_reachability and acs_path, so that each
// verdict is computed once for both.
type pairScan struct {
	n     int // pairs
	reach reachScan
	acs   acsScan
}

// scan returns the pairScan of f, made on first use: one verdict per two classes
// of devices (pairClass) for the counts, then one per pair listed.
func (f *Facts) scan() *pairScan {
	f.scanOnce.Do(func() {
		s := &pairScan{
			acs: acsScan{bridges: map[pcie.Address]*redirected{}},
		}
		cs := f.pairClasses()
		for cp := range f.classPairs(cs) {
			v := f.verdict(cp.first)
			s.n += cp.n
			s.reach.count(cp, &v)
			s.acs.count(cp, &v, f.overNVLink(cp.first))
		}
		if s.reach.whyPair != nil {
			s.reach.why = f.verdict(*s.reach.whyPair).Reason
		}
		// Whether the pairs of two classes make lines, judged once per two.
		type key struct{ a, b int }
		lines := map[key][3]bool{}
		kinds := func(a, b *pairClass) [3]bool {
			k := key{min(a.id, b.id), max(a.id, b.id)}
			if l, ok := lines[k]; ok {
				return l
			}
			p := f.pairAt(min(a.members[0], b.members[0]), max(a.members[0], b.members[0]))
			if a == b {
				p = f.pairAt(a.members[0], a.members[1])
			}
			v := f.verdict(p)
			finding, subject := s.reach.makes(p, &v)
			l := [3]bool{finding, subject, s.acs.makes(&v, f.overNVLink(p))}
			lines[k] = l
			return l
		}
		open := func() [3]bool {
			rf, rs := s.reach.lines.open()
			_, as := s.acs.lines.open()
			return [3]bool{rf, rs, as}
		}
		want := func(a, b *pairClass) bool {
			o, l := open(), kinds(a, b)
			return o[0] && l[0] || o[1] && l[1] || o[2] && l[2]
		}
		done := func() bool { return open() == [3]bool{} }
		for p := range f.pairsAmong(cs, want, done) {
			v := f.verdict(p)
			s.reach.add(p, &v)
			s.acs.add(p, &v, f.overNVLink(p))
			if done() {
				break
			}
		}
		s.reach.lines.settle()
		s.acs.finish()
		f.scanned = s
	})
	return f.scanned
}

// count adds up the devices of the roles of counts that keep takes.
func count(counts *[numRoles]int, keep func(role) bool) int {
	n := 0
	for r := range role(numRoles) {
		if keep(r) {
			n += counts[r]
		}
	}
	return n
}

// partners counts the devices of interest other than f.devices[i] whose roles
// keep takes, without visiting them.
func (f *Facts) partners(i int, keep func(role) bool) int {
	n := count(&f.perRole, keep)
	if keep(f.roles[i]) {
		n-- // not its own partner
	}
	return n
}

// pathSets are the devices on the paths of the pairs of interest and what
// each path is needed for.
type pathSets struct {
	devices []*pcie.Device                // see pathDevices
	blocks  map[*pcie.Device][]Capability // see pathBlocks
}

// pathDevices returns the GPUs, RDMA NICs, NVMe controllers and accelerators of
// interest and every function on the path (Topology.Path) of a pair of
// interest, each once, in address order.
func (f *Facts) pathDevices() []*pcie.Device { return f.paths().devices }

// pathBlocks maps every device of pathDevices to the capabilities a problem
// on it stands in the way of: its own role's, and those of the pairs whose
// path crosses it.
func (f *Facts) pathBlocks() map[*pcie.Device][]Capability { return f.paths().blocks }

// paths returns the pathSets of f, made on first use with work linear in the
// devices of interest times their depth, whatever the number of pairs.
//
// Topology.Path from a to b climbs from a to the nearest device common to both
// chains (pcie.CommonUpstream), then descends to b; without a common device it
// climbs both chains whole. So the union of the paths of all pairs with a
// device x is x's chain (x, then its Ancestors) from x up to the highest of
// those common devices, and chain element k ≥ 1 is on it exactly when some
// partner of x lies outside the subtree of element k−1. Counting the devices of
// each role below every chain element answers that for every x, once per
// capability, without visiting a pair.
func (f *Facts) paths() *pathSets {
	f.pathOnce.Do(func() {
		chain := func(x *pcie.Device) []*pcie.Device {
			return append([]*pcie.Device{x}, x.Ancestors()...)
		}
		below := map[*pcie.Device]*[numRoles]int{} // devices of each role in the subtree of a chain element
		for i, x := range f.devices {
			for _, u := range chain(x) {
				c := below[u]
				if c == nil {
					c = new([numRoles]int)
					below[u] = c
				}
				c[f.roles[i]]++
			}
		}
		s := &pathSets{blocks: map[*pcie.Device][]Capability{}}
		on := map[*pcie.Device]bool{}
		for i, x := range f.devices {
			s.blocks[x] = deviceBlocks(x)
			if f.roles[i].peer() {
				on[x] = true
			}
		}
		for i, x := range f.devices {
			rx := f.roles[i]
			ch := chain(x)
			for _, c := range capabilities {
				of := func(r role) bool { return rx.pairsWith(r) && rx.pairCap(r) == c }
				if f.partners(i, of) == 0 {
					continue
				}
				all := count(&f.perRole, of) // x's partners, and x when it would be one
				for k, u := range ch {
					if k > 0 && count(below[ch[k-1]], of) == all {
						break // every partner is below the previous element
					}
					on[u] = true
					s.blocks[u] = appendNew(s.blocks[u], c)
				}
			}
		}
		s.devices = make([]*pcie.Device, 0, len(on))
		for d := range on {
			s.devices = append(s.devices, d)
		}
		slices.SortFunc(s.devices, func(a, b *pcie.Device) int { return a.Address.Compare(b.Address) })
		f.onPaths = s
	})
	return f.onPaths
}
