package check

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pcie"
)

// scanEachPair is what scan finds, made the direct way: every pair of interest
// judged on its own, in order, as the checks did before they judged classes.
func scanEachPair(f *Facts) scanView {
	var s scanView
	s.Bridges = map[string]redirectedView{}
	reach, acs := pairLines{}, pairLines{}
	for p := range f.pairs() {
		s.N++
		v := f.verdict(p)
		s.Counts[v.MapType]++
		kernelUser := p.blocks() == CapNVMeP2P
		if kernelUser {
			s.Users++
		}
		switch {
		case v.MapType == p2pdma.NotSupported && !kernelUser:
			s.RefusedGPU++
			reach.finding(p, Pass, "not-supported for kernel P2PDMA, which GPU peer copies and GPUDirect RDMA do not use: ", v.Reason)
		case v.MapType == p2pdma.NotSupported:
			s.Refused++
			reach.subject(p)
			vmd := ""
			if behindVMD(p.a) || behindVMD(p.b) {
				s.VMD++
				vmd = " (an NVMe controller behind Intel VMD)"
			}
			reach.finding(p, Warn, "not-supported: ", v.Reason, vmd)
		case v.MapType == p2pdma.Unknown && kernelUser:
			s.Unknown++
			s.ACSUnknown = s.ACSUnknown || v.HasUnknown(p2pdma.ACSUnread)
			if s.Why == "" {
				s.Why = v.Reason
			}
			reach.finding(p, Unknown, "unknown: ", v.Reason)
		}
		if v.Fix != nil {
			for _, a := range v.Fix.Bridges {
				b, ok := s.Bridges[a.String()]
				if !ok {
					b.First = pairSubject(p)
				}
				b.N++
				s.Bridges[a.String()] = b
			}
			s.RedirectBlocks = appendNew(s.RedirectBlocks, p.blocks())
		}
		if len(v.ACSRedirect) == 0 && v.HasUnknown(p2pdma.ACSUnread) {
			s.ACSUnknownPairs++
			acs.subject(p)
			s.UnknownBlocks = appendNew(s.UnknownBlocks, p.blocks())
		}
	}
	s.ReachFindings, s.ReachSubjects, s.NotListed, s.ACSSubjects = reach.findings, reach.subjects, reach.notListed, acs.subjects
	return s
}

// scanView is what scan finds, for comparison.
type scanView struct {
	N                                        int
	Counts                                   mapTypeCount
	RefusedGPU, Refused, Unknown, VMD, Users int
	ACSUnknown                               bool
	Why                                      string
	ReachFindings                            []Finding
	ReachSubjects                            []string
	NotListed                                [len(listOrder)]int
	Bridges                                  map[string]redirectedView
	RedirectBlocks, UnknownBlocks            []Capability
	ACSUnknownPairs                          int
	ACSSubjects                              []string
}

type redirectedView struct {
	N     int
	First string
}

func viewOf(s *pairScan) scanView {
	v := scanView{N: s.n, Counts: s.reach.counts, RefusedGPU: s.reach.refusedGPU, Refused: s.reach.refused,
		Unknown: s.reach.unknown, VMD: s.reach.vmd, Users: s.reach.users, ACSUnknown: s.reach.acsUnknown, Why: s.reach.why,
		ReachFindings: s.reach.lines.findings, ReachSubjects: s.reach.lines.subjects, NotListed: s.reach.lines.notListed,
		Bridges: map[string]redirectedView{}, RedirectBlocks: s.acs.redirectBlocks, UnknownBlocks: s.acs.unknownBlocks,
		ACSUnknownPairs: s.acs.unknown, ACSSubjects: s.acs.lines.subjects}
	for a, b := range s.acs.bridges {
		v.Bridges[a.String()] = redirectedView{b.n, b.first}
	}
	return v
}

// blind returns n with the config space of seeded random functions cut to 64
// bytes (ACS and port types unknown) and seeded random functions dropped (their
// children's parents unknown).
func blind(n *node.Node, r *rand.Rand, cut, drop float64) *node.Node {
	var recs []pcie.Record
	for _, d := range n.Topology.Devices {
		rec := d.Record
		if r.Float64() < drop && d.IsBridge() {
			continue
		}
		if r.Float64() < cut && len(rec.Config) > 64 {
			rec.Config = rec.Config[:64]
		}
		recs = append(recs, rec)
	}
	c := *n
	c.Topology = pcie.NewTopology(recs)
	return &c
}

// TestScanMatchesEachPair: judging classes of pairs finds what judging every pair
// finds, counts and lists and firsts alike, on every named fixture (seen whole,
// partly unread, and with bridges missing), on flat trees of hundreds of GPUs and
// NVMe drives whose lines overflow the bound, and on a switch tree where every
// downstream port redirects.
func TestScanMatchesEachPair(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	var nodes []*node.Node
	var names []string
	for _, name := range fixture.Names() {
		if name == "large" {
			continue
		}
		n := testnode.Load(t, name, node.Options{NoNames: true})
		nodes = append(nodes, n, blind(n, r, 0.4, 0), blind(n, r, 0.2, 0.15))
		names = append(names, name, name+" unread", name+" gaps")
	}
	flat := testnode.Machine(t, flatNVMe(600, 40), node.Options{NoNames: true})
	nodes = append(nodes, flat, blind(flat, r, 1, 0))
	names = append(names, "flat", "flat unread")
	wide := testnode.Machine(t, wideSwitch(30), node.Options{NoNames: true})
	nodes = append(nodes, wide, blind(wide, r, 0.5, 0))
	names = append(names, "wide switch", "wide switch unread")
	merged := 0
	for i, n := range nodes {
		t.Run(names[i], func(t *testing.T) {
			f := NewFacts(n, Inputs{Source: Snapshot})
			want := scanEachPair(f)
			got := viewOf(f.scan())
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("scan (-each pair +by classes):\n%s", diff)
			}
			merged += len(f.devices) - len(f.pairClasses())
		})
	}
	if merged == 0 {
		t.Error("no class held two devices: the test proves nothing")
	}
}

// flatNVMe is gpus GPUs and nvme NVMe controllers on one root bus of a host bridge
// the kernel does not whitelist: every pair with an NVMe controller is refused.
func flatNVMe(gpus, nvme int) *fixture.Machine {
	m := fixture.New().CPU("GenuineIntel", 6, 143, "Intel(R) Xeon(R) Platinum 8480C").CPUs(8).Kernel("6.8.0-60-generic")
	var hb *fixture.HostBridge
	for i := range gpus + nvme {
		if i%256 == 0 {
			hb = m.HostBridge(0, uint8(i/256), 0)
		}
		opts := []fixture.Option{fixture.Conventional(), fixture.ID(0x10de, 0x2335), fixture.Class(0x030200), fixture.Driver("nvidia")}
		if i >= gpus {
			opts = []fixture.Option{fixture.Conventional(), fixture.ID(0x144d, 0xa824), fixture.Class(0x010802), fixture.Driver("nvme"), fixture.NVMe(fmt.Sprintf("nvme%d", i-gpus))}
		}
		hb.Endpoint(uint8(i%256/8), uint8(i%8), opts...)
	}
	return m
}

// wideSwitch is one PEX switch with n downstream ports, ACS redirect set on every
// other one, a GPU below each and an NVMe drive below every third.
func wideSwitch(n int) *fixture.Machine {
	m := fixture.New().CPU("GenuineIntel", 6, 143, "Intel(R) Xeon(R) Platinum 8480C").CPUs(8).Kernel("6.8.0-60-generic")
	hb := m.HostBridge(0, 0, 0)
	hb.Endpoint(0, 0, fixture.ID(0x8086, 0x09a2), fixture.Class(0x088000))
	rp := hb.RootPort(1, 0, fixture.ID(0x8086, 0x352a), fixture.ACS(0x5f, 0x1d))
	sw := rp.Switch(n, fixture.ID(0x1000, 0xc030))
	for i := range n {
		dsp := sw.Down(i)
		if i%2 == 0 {
			dsp.Set(fixture.ACS(0x5f, 0x1d))
		}
		if i%3 == 0 {
			dsp.Switch(2, fixture.ID(0x1000, 0xc030))
			dsp.Endpoint(fixture.ID(0x144d, 0xa824), fixture.Class(0x010802), fixture.Driver("nvme"), fixture.NVMe(fmt.Sprintf("nvme%d", i)))
			continue
		}
		dsp.Endpoint(fixture.ID(0x10de, 0x2335), fixture.Class(0x030200), fixture.Driver("nvidia"))
	}
	return m
}

// TestScanClassesFlat: on a flat tree of 1,000 GPUs on four root buses, a class
// per host bridge, the scan judges a few dozen pairs for the counts and one per
// pair listed, not half a million: its verdicts are counted.
func TestScanClassesFlat(t *testing.T) {
	n := testnode.Machine(t, flatNVMe(1000, 0), node.Options{NoNames: true})
	f := NewFacts(n, Inputs{Source: Snapshot})
	if got := len(f.pairClasses()); got != 4 {
		t.Fatalf("%d classes, want one per host bridge", got)
	}
	if s := f.scan(); s.n != 1000*999/2 {
		t.Errorf("%d pairs, want %d", s.n, 1000*999/2)
	}
	// A verdict per two classes for the counts and again for what they list, one
	// per pair listed (maxPairLines findings).
	if limit := maxPairLines + 2*10; f.verdicts > limit {
		t.Errorf("%d verdicts computed, want at most %d", f.verdicts, limit)
	}
}

// judgeEachPair is judgeTranslation's lines and counts made the direct way, every
// pair judged on its own in order.
func judgeEachPair(f *Facts, translated map[pcie.Address]bool) (lines pairLines, blocks []Capability, affected, onPath int, unknown bool) {
	dmabuf := f.dmabuf()
	for p := range f.pairs() {
		j := f.judgeTranslated(p, translated, dmabuf)
		if !j.onPath {
			continue
		}
		onPath++
		unknown = unknown || j.unknown
		if j.block != "" {
			affected++
			blocks = appendNew(blocks, j.block)
		}
		lines.finding(p, j.status, j.msg...)
		if j.subject {
			lines.subject(p)
		}
	}
	return
}

// TestJudgeTranslationMatchesEachPair: judging classes finds, for random sets of
// translated devices, the findings, subjects and blocks judging every pair finds.
func TestJudgeTranslationMatchesEachPair(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 62))
	for _, name := range []string{"dgx-h100", "amd-epyc", "sriov-nic", "nvme-cmb", "vmd-gpu"} {
		n := testnode.Load(t, name, node.Options{NoNames: true})
		for _, flat := range []*node.Node{n, testnode.Machine(t, flatNVMe(300, 30), node.Options{NoNames: true})} {
			f := NewFacts(flat, Inputs{Source: Snapshot})
			translated := map[pcie.Address]bool{}
			for _, d := range f.devices {
				if r.IntN(2) == 0 {
					translated[d.Address] = true
				}
			}
			lines, blocks, affected, onPath, unknown := judgeEachPair(f, translated)
			var want, got Result
			lines.listFindings(&want)
			want.Subjects, want.Blocks = lines.subjects, blocks
			f.judgeTranslation(&got, translated)
			if onPath > 0 {
				// Both sides summarize the same counts; compare what each listed.
				if diff := cmp.Diff(want.Findings, got.Findings); diff != "" {
					t.Errorf("%s: findings (-each pair +by classes):\n%s", name, diff)
				}
				wantStatus := Pass
				switch {
				case affected > 0:
					wantStatus = Fail
				case unknown:
					wantStatus = Unknown
				}
				if got.Status != wantStatus {
					t.Errorf("%s: status %s, want %s", name, got.Status, wantStatus)
				}
				if wantStatus != Pass && !slices.Equal(want.Subjects, got.Subjects) {
					t.Errorf("%s: subjects %v, want %v", name, got.Subjects, want.Subjects)
				}
				if wantStatus == Fail && !slices.Equal(want.Blocks, got.Blocks) {
					t.Errorf("%s: blocks %v, want %v", name, got.Blocks, want.Blocks)
				}
			}
		}
	}
}

// TestScanDeepTree: a chain of 250 bridges whose ACS was not read, ten GPUs below
// each, as a crafted snapshot builds it from short sysfs paths (defect 2 of issue
// 21: --quick took 13 s). The ten GPUs below a bridge are twins, so the report
// judges about 250²/2 pairs of classes, not the 3 million pairs, and each verdict
// lists one unread bridge, not up to 250: the scan's verdicts and allocations are
// counted.
func TestScanDeepTree(t *testing.T) {
	var recs []pcie.Record
	parent := "pci0000:00"
	for i := range 250 {
		b := pcie.Address{Bus: uint8(i)}
		recs = append(recs, pcie.Record{Address: b, Path: parent + "/" + b.String(), Class: 0x060400})
		for g := range 10 {
			a := pcie.Address{Bus: uint8(i), Device: uint8(1 + g)}
			recs = append(recs, pcie.Record{Address: a, Path: "pci0000:00/" + b.String() + "/" + a.String(), Class: 0x030200, Vendor: 0x10de, Device: 0x2335})
		}
		parent = "pci0000:00/" + b.String()
	}
	f := NewFacts(&node.Node{Topology: pcie.NewTopology(recs)}, Inputs{Source: Snapshot})
	if got := len(f.pairClasses()); got != 250 {
		t.Fatalf("%d classes, want one per bridge", got)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := f.scan()
	runtime.ReadMemStats(&after)
	if s.n != 2500*2499/2 || s.acs.unknown != s.n {
		t.Errorf("%d pairs, %d with ACS unknown; want %d of each", s.n, s.acs.unknown, 2500*2499/2)
	}
	classPairs := 250 * 251 / 2
	if limit := 2*classPairs + 3*maxPairLines; f.verdicts > limit {
		t.Errorf("%d verdicts computed, want at most %d", f.verdicts, limit)
	}
	if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(64<<20); got > limit {
		t.Errorf("the scan allocated %d MiB, want at most %d", got>>20, limit>>20)
	}
}
