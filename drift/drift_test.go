package drift

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/snapshot"
)

// spec describes a small HGX-like node with the knobs each kind of drift turns:
// two root complexes (NUMA 0 and 1), each a root port, a switch and on its
// ports a GPU and an RDMA NIC; the second switch has a third port.
type spec struct {
	kernel      string
	cmdline     string
	iommu       string
	hostname    string
	switchACS   uint16
	numa1       int
	gpu1Trained pcie.Link
	bar1        uint64
	gpuRev      uint8
	noGPU1      bool
	nic1Port    int
	nvme        bool
	renumber    bool
	peermem     bool
	openDriver  bool
	nvlinks     int // NVLinks between the GPUs in the recorded NVML facts; -1: none recorded
	uuid        string
	configView  int
}

func baseSpec() spec {
	return spec{kernel: "6.8.0-60-generic", iommu: "identity", hostname: "node1", numa1: 1, bar1: 64 << 30, gpuRev: 0xa1,
		nic1Port: 1, peermem: true, openDriver: true, nvlinks: -1, uuid: "GPU-redacted-",
		cmdline: "BOOT_IMAGE=/boot/vmlinuz root=UUID=11111111-2222 ro intel_iommu=on iommu=pt"}
}

const acsCap = pcie.ACSSourceValidation | pcie.ACSTranslationBlock | pcie.ACSRequestRedirect |
	pcie.ACSCompletionRedirect | pcie.ACSUpstreamForwarding | pcie.ACSDirectTranslated

func (s spec) machine() *fixture.Machine {
	m := fixture.New().CPU("GenuineIntel", 6, 143, "Intel(R) Xeon(R) Platinum 8480C").CPUs(8).
		Kernel(s.kernel).Cmdline(s.cmdline).IOMMU(s.iommu).KernelConfig(true).
		Module("ib_core").Module("mlx5_core").Module("mlx5_ib", "ib_core", "mlx5_core").
		NvidiaDriver("570.133.20", s.openDriver).Gdrdrv(235, 0o666).
		File("proc/sys/kernel/hostname", s.hostname+"\n")
	if s.peermem {
		m.NvidiaPeermem()
	}
	if s.configView > 0 {
		m.ConfigView(s.configView)
	}
	for i, numa := range []int{0, s.numa1} {
		hb := m.HostBridge(0, uint8(0x10+0x70*i), numa)
		hb.Endpoint(0, 0, fixture.ID(0x8086, 0x09a2), fixture.Class(0x088000))
		rpOpts := []fixture.Option{fixture.ID(0x8086, 0x352a), fixture.ACS(acsCap, 0x1d), fixture.Link(5, 16)}
		if i == 1 && s.renumber {
			rpOpts = append(rpOpts, fixture.Bus(0xa0)) // firmware leaves a gap: every bus below moves
		}
		rp := hb.RootPort(1, 0, rpOpts...)
		sw := rp.Switch(2+i, fixture.ID(0x1000, 0xc030), fixture.Link(5, 16)).Downstream(fixture.ACS(acsCap, s.switchACS))
		if i == 0 || !s.noGPU1 {
			gpuOpts := []fixture.Option{fixture.ID(0x10de, 0x2330), fixture.Class(0x030200), fixture.Revision(s.gpuRev),
				fixture.Driver("nvidia"), fixture.Link(5, 16), fixture.BAR(0, 16<<20, false, false),
				fixture.BAR(1, s.bar1, true, true), fixture.ReBAR(1, 64<<30, 128<<30), fixture.Label(fmt.Sprintf("gpu%d", i))}
			if i == 1 && s.gpu1Trained.Speed != 0 {
				gpuOpts = append(gpuOpts, fixture.Trained(s.gpu1Trained.Speed, s.gpu1Trained.Width))
			}
			sw.Down(0).Endpoint(gpuOpts...)
		}
		port := 1
		if i == 1 {
			port = s.nic1Port
		}
		sw.Down(port).Endpoint(fixture.ID(0x15b3, 0x1021), fixture.Class(0x020700), fixture.Driver("mlx5_core"),
			fixture.Link(5, 16), fixture.BAR(0, 32<<20, true, true), fixture.RDMA(fmt.Sprintf("mlx5_%d", i)),
			fixture.Label(fmt.Sprintf("nic%d", i)))
		if i == 1 && s.nvme {
			sw.Down(2).Endpoint(fixture.ID(0x144d, 0xa824), fixture.Class(0x010802), fixture.Driver("nvme"), fixture.Link(4, 4),
				fixture.BAR(0, 32<<10, true, false), fixture.NVMe("nvme0"))
		}
	}
	if s.nvlinks >= 0 {
		m.File("p2pkit/nvml.json", s.nvmlFacts(m))
	}
	return m
}

// nvmlFacts are NVML facts as a snapshot records them: the GPUs joined by
// s.nvlinks links.
func (s spec) nvmlFacts(m *fixture.Machine) string {
	f := gpu.Facts{DriverVersion: "570.133.20", CUDADriverVersion: 12080}
	var addrs []pcie.Address
	for _, l := range []string{"gpu0", "gpu1"} {
		if g := m.Func(l); g != nil {
			addrs = append(addrs, g.Address())
		}
	}
	for i, a := range addrs {
		nv := &gpu.NVLink{Active: s.nvlinks}
		for k := range s.nvlinks {
			r := addrs[1-i]
			nv.Links = append(nv.Links, gpu.NVLinkPeer{Link: k, Remote: &r, RemoteType: "gpu"})
		}
		f.GPUs = append(f.GPUs, gpu.GPU{Index: i, UUID: s.uuid + fmt.Sprint(i), Address: &a, NVLink: nv})
	}
	b, err := json.Marshal(f)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// load reads a machine as p2pcheck --snapshot does, from its snapshot in memory.
func load(tb testing.TB, m *fixture.Machine) *node.Node {
	tb.Helper()
	var b bytes.Buffer
	if err := m.WriteSnapshot(&b); err != nil {
		tb.Fatal(err)
	}
	root, err := snapshot.Read(&b)
	if err != nil {
		tb.Fatal(err)
	}
	defer root.Close()
	n, err := node.Load(root, node.Options{NoNames: true})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

func summarize(tb testing.TB, s spec) *Summary {
	tb.Helper()
	return Summarize(load(tb, s.machine()))
}

// brief is a change as the tests compare it.
func brief(c Change) string {
	var where string
	if c.Device != nil {
		where = " " + cmp.Or(c.Device.Label, string(c.Device.Role))
	}
	if c.Peer != nil {
		where += ">" + cmp.Or(c.Peer.Label, string(c.Peer.Role))
	}
	s := fmt.Sprintf("%s %s %s%s", c.Severity, c.Kind, c.What, where)
	if c.Fact != "" {
		s += " " + c.Fact + ": " + c.Golden + " -> " + c.Node
	}
	if c.Note != "" {
		s += " (" + c.Note + ")"
	}
	return s
}

func briefs(r Result) []string {
	var out []string
	for _, c := range r.Changes {
		out = append(out, brief(c))
	}
	return out
}

// TestCompareKinds compares the base node with a node that drifted in one way,
// for each kind of drift: the report lists exactly what changed, and the
// outcome says whether a verdict changed.
func TestCompareKinds(t *testing.T) {
	golden := summarize(t, baseSpec())
	tests := []struct {
		name    string
		drift   func(*spec)
		want    []string // every change; "..." at the end: at least these, in order
		outcome Outcome
	}{
		{"a GPU missing", func(s *spec) { s.noGPU1 = true }, []string{"verdict devices missing GPU1"}, OutcomeVerdict},
		{"an NVMe added", func(s *spec) { s.nvme = true }, []string{
			"warn devices added nvme",
			"verdict checks changed check p2p_reachability: skip -> pass"}, OutcomeVerdict},
		{"a NIC moved to another slot", func(s *spec) { s.nic1Port = 2 }, []string{
			"verdict devices moved NIC1 place: 0000:80:01.0/0.0/1.0/0.0 -> 0000:80:01.0/0.0/2.0/0.0 (now at 0000:85:00.0)", "..."}, OutcomeVerdict},
		{"a GPU link trained at Gen4 x8", func(s *spec) { s.gpu1Trained = pcie.Link{Speed: 4, Width: 8} }, []string{
			"warn link changed GPU1 link: Gen5 x16 -> Gen4 x8 (downgraded) (new downgrade)",
			"verdict checks changed check pcie_link: pass -> warn"}, OutcomeVerdict},
		{"ACS redirect turned on", func(s *spec) { s.switchACS = 0x1d }, []string{
			"warn acs changed switch-port ACS Control: SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans- -> SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans- (ACS redirect now on (RR CR))",
			"warn acs changed switch-port ACS Control: SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans- -> SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans- (ACS redirect now on (RR CR))",
			"..."}, OutcomeVerdict},
		{"BAR1 at half its size", func(s *spec) { s.bar1 = 32 << 30 }, []string{
			"warn bar changed GPU0 BAR 1 (BAR1): 64 GiB -> 32 GiB", "..."}, OutcomeWarn},
		{"IOMMU translated", func(s *spec) {
			s.iommu, s.cmdline = "DMA", "BOOT_IMAGE=/boot/vmlinuz root=UUID=11111111-2222 ro intel_iommu=on"
		}, []string{
			"warn iommu changed IOMMU mode: identity -> DMA", "warn iommu changed IOMMU parameters: intel_iommu=on iommu=pt -> intel_iommu=on",
			"warn iommu changed GPU0 IOMMU domain: identity -> DMA", "warn iommu changed NIC0 IOMMU domain: identity -> DMA",
			"warn iommu changed GPU1 IOMMU domain: identity -> DMA", "warn iommu changed NIC1 IOMMU domain: identity -> DMA",
		}, OutcomeUnknown}, // the node's iommu_mode check is unknown: whether the paths need passthrough
		{"a root complex on another NUMA node", func(s *spec) { s.numa1 = 0 }, []string{
			"warn numa changed root-port NUMA node: 1 -> 0", "warn numa changed GPU1 NUMA node: 1 -> 0", "warn numa changed NIC1 NUMA node: 1 -> 0",
			"..."}, OutcomeVerdict},
		{"a kernel update", func(s *spec) { s.kernel = "6.8.0-61-generic" }, []string{
			"warn versions changed kernel: 6.8.0-60-generic -> 6.8.0-61-generic"}, OutcomeWarn},
		{"a GPU of another revision", func(s *spec) { s.gpuRev = 0xa2 }, []string{
			"warn versions changed GPU0 IDs: 10de:2330 subsystem 10de:0000 rev a1 class 030200 -> 10de:2330 subsystem 10de:0000 rev a2 class 030200",
			"warn versions changed GPU1 IDs: 10de:2330 subsystem 10de:0000 rev a1 class 030200 -> 10de:2330 subsystem 10de:0000 rev a2 class 030200"}, OutcomeWarn},
		{"nvidia_peermem not loaded, proprietary driver", func(s *spec) { s.peermem, s.openDriver = false, false }, []string{
			"warn versions changed NVIDIA driver: 570.133.20 open -> 570.133.20 proprietary",
			"warn versions changed module nvidia_peermem: loaded -> not loaded",
			"verdict pairs changed GPU0>NIC0 NCCL transport: GPUDirect RDMA recv yes, send yes -> GPUDirect RDMA recv no, send no",
			"..."}, OutcomeVerdict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := baseSpec()
			tt.drift(&s)
			r := Compare(golden, summarize(t, s))
			got := briefs(r)
			want := tt.want
			if want[len(want)-1] == "..." {
				want = want[:len(want)-1]
				if len(got) > len(want) {
					got = got[:len(want)]
				}
			}
			if diff := gocmp.Diff(want, got); diff != "" {
				t.Errorf("changes (-want +got):\n%s\nall: %s", diff, strings.Join(briefs(r), "\n"))
			}
			if o := r.Outcome(); o != tt.outcome {
				t.Errorf("outcome %s, want %s", o, tt.outcome)
			}
		})
	}
}

// TestCompareACSPairs: with ACS redirect on the switch ports, every pair that
// turns at a switch goes through the root complex, and the report's acs_path
// check fails.
func TestCompareACSPairs(t *testing.T) {
	golden := summarize(t, baseSpec())
	s := baseSpec()
	s.switchACS = 0x1d
	r := Compare(golden, summarize(t, s))
	var pairs []string
	for _, c := range r.Changes {
		switch {
		case c.Kind == Pairs:
			pairs = append(pairs, c.Device.Label+">"+c.Peer.Label+" "+c.Fact+": "+c.Golden+" -> "+c.Node)
		case c.Kind == Checks && c.Fact == "check acs_path":
			if c.Golden != "pass" || c.Node != "fail" {
				t.Errorf("acs_path %s -> %s, want pass -> fail", c.Golden, c.Node)
			}
		}
	}
	want := []string{
		"GPU0>NIC0 kernel verdict: bus-addr, distance 4 -> thru-host-bridge, distance 4",
		"NIC0>GPU0 kernel verdict: bus-addr, distance 4 -> thru-host-bridge, distance 4",
		"GPU1>NIC1 kernel verdict: bus-addr, distance 4 -> thru-host-bridge, distance 4",
		"NIC1>GPU1 kernel verdict: bus-addr, distance 4 -> thru-host-bridge, distance 4",
	}
	if diff := gocmp.Diff(want, pairs); diff != "" {
		t.Errorf("pairs (-want +got):\n%s", diff)
	}
}

// TestCompareNVLink: NVLink counts come from the NVML facts a snapshot
// recorded; fewer links change each GPU's count and the pair's class.
func TestCompareNVLink(t *testing.T) {
	g := baseSpec()
	g.nvlinks = 18
	n := g
	n.nvlinks = 12
	r := Compare(summarize(t, g), summarize(t, n))
	want := []string{
		"warn nvlink changed GPU0 NVLinks: 18 -> 12",
		"warn nvlink changed GPU1 NVLinks: 18 -> 12",
		"verdict pairs changed GPU0>GPU1 path class: NV18 (nvidia-smi), SYS (NCCL) -> NV12 (nvidia-smi), SYS (NCCL)",
		"verdict pairs changed GPU1>GPU0 path class: NV18 (nvidia-smi), SYS (NCCL) -> NV12 (nvidia-smi), SYS (NCCL)",
	}
	if diff := gocmp.Diff(want, briefs(r)); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	// A node without NVML facts cannot show the links the golden records: not
	// compared, never a change.
	n.nvlinks = -1
	r = Compare(summarize(t, g), summarize(t, n))
	if r.Outcome() != OutcomeUnknown || len(r.Changes) != 0 {
		t.Errorf("golden with NVLinks, node without NVML facts: outcome %s, want unknown; %v %+v", r.Outcome(), briefs(r), r.Gaps)
	}
}

// TestRenumberingIsNotDrift: firmware that numbers the buses below a root port
// differently moves every address there, and no place: nothing drifts and the
// signatures are equal.
func TestRenumberingIsNotDrift(t *testing.T) {
	g := baseSpec()
	n := baseSpec()
	n.renumber = true
	gs, ns := summarize(t, g), summarize(t, n)
	gpu1 := func(s *Summary) pcie.Address { return s.Devices[s.Interest[2]].Address }
	if gpu1(gs) == gpu1(ns) {
		t.Fatalf("the renumbered node has GPU1 at %s as the golden: no renumbering to test", gpu1(ns))
	}
	r := Compare(gs, ns)
	if len(r.Changes) != 0 || r.Outcome() != OutcomeNone {
		t.Errorf("renumbered buses drift: %v", briefs(r))
	}
	if gs.Signature() != ns.Signature() {
		t.Errorf("signatures differ: %s, %s", gs.Signature(), ns.Signature())
	}
}

// TestCosmeticIsNotDrift: host names, GPU UUIDs and the rest of the kernel
// command line never count.
func TestCosmeticIsNotDrift(t *testing.T) {
	g := baseSpec()
	g.nvlinks = 18
	n := g
	n.hostname, n.uuid = "node2", "GPU-5f1c0000-"
	n.cmdline = "BOOT_IMAGE=/boot/vmlinuz-6.8.0-60-generic root=UUID=99999999-0000 ro quiet splash intel_iommu=on iommu=pt"
	gs, ns := summarize(t, g), summarize(t, n)
	if r := Compare(gs, ns); len(r.Changes) != 0 {
		t.Errorf("cosmetic differences drift: %v", briefs(r))
	}
	if gs.Signature() != ns.Signature() {
		t.Errorf("signatures differ: %s, %s", gs.Signature(), ns.Signature())
	}
}

// TestCompareUnprivileged: a node read without root shows 64 bytes of config
// space, so ACS and the links the golden records cannot be compared: the
// comparison's verdict is unknown, never "no drift".
func TestCompareUnprivileged(t *testing.T) {
	n := baseSpec()
	n.configView = 64
	r := Compare(summarize(t, baseSpec()), summarize(t, n))
	for _, c := range r.Changes {
		if c.Kind != Checks { // a check may decide otherwise on fewer facts; no fact may change
			t.Errorf("unprivileged node: %s", brief(c))
		}
	}
	if o := r.Outcome(); o != OutcomeUnknown && o != OutcomeVerdict {
		t.Errorf("outcome %s, want unknown (or verdict, a check decided otherwise)", o)
	}
	blocking := map[string]int{}
	for _, g := range r.Gaps {
		if g.Blocking {
			blocking[g.Fact] += g.Count
		}
	}
	if blocking["ACS Control"] == 0 || blocking["check acs_path"] == 0 || blocking["link"] == 0 {
		t.Errorf("ACS is not reported as not compared: %+v", r.Gaps)
	}
}

// TestSelfIsNoDrift: a machine compared with itself has no drift, whatever it
// is.
func TestSelfIsNoDrift(t *testing.T) {
	for _, name := range []string{"dgx-h100", "amd-epyc", "sriov-nic", "vmd-gpu", "malformed", "grace-gh200"} {
		t.Run(name, func(t *testing.T) {
			m, err := fixture.ByName(name)
			if err != nil {
				t.Fatal(err)
			}
			s := Summarize(load(t, m))
			r := Compare(s, s)
			if len(r.Changes) != 0 || slices.ContainsFunc(r.Gaps, func(g Gap) bool { return g.Blocking }) {
				t.Errorf("%s against itself: %v %+v", name, briefs(r), r.Gaps)
			}
			if again := Summarize(load(t, m)); again.Signature() != s.Signature() {
				t.Errorf("two reads of %s have signatures %s and %s", name, s.Signature(), again.Signature())
			}
		})
	}
}

func TestRedirectWords(t *testing.T) {
	for ctrl, want := range map[uint16]string{0: "", 0x1d: "RR CR", 0x2c: "RR CR EC", 0x20: "EC", 0x5f: "RR CR"} {
		if got := RedirectWords(ctrl); got != want {
			t.Errorf("RedirectWords(%#x) = %q, want %q", ctrl, got, want)
		}
	}
}
