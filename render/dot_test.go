package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/drift"
	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/matrix"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/snapshot"
)

// dotProgram returns the path of Graphviz's dot, or skips the test: CI installs
// graphviz, so there (CI=true) a missing dot fails the test instead.
func dotProgram(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("dot")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("graphviz is required in CI: %v", err)
		}
		t.Skipf("graphviz not installed (%v): apt-get install graphviz", err)
	}
	return path
}

// layout is what Graphviz made of a picture (dot -Tjson): every node and
// cluster by name, and every edge by its ends and ports, each with the
// attributes that say what is drawn, not where.
type layout struct {
	objects map[string]map[string]string
	edges   map[string]map[string]string
	// pos is each node's centre, segs the tree's links as straight lines
	// between the centres of their ends.
	pos  map[string][2]float64
	segs [][2][2]float64
}

// layoutKeys are the attributes of dot -Tjson that place things; the rest say
// what is drawn.
var layoutKeys = []string{"pos", "bb", "lp", "xlp", "width", "height", "lheight", "lwidth", "nodes", "edges", "subgraphs", "_gvid", "tail", "head"}

// render runs dot on src and fails t on any message dot prints: a warning
// there is a picture that lost an edge or a label.
func renderDot(t *testing.T, dotBin, src string, format string) []byte {
	t.Helper()
	cmd := exec.Command(dotBin, "-T"+format)
	cmd.Stdin = strings.NewReader(src)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil || errb.Len() > 0 {
		t.Fatalf("dot -T%s: %v\n%s", format, err, errb.String())
	}
	return out.Bytes()
}

func parseLayout(t *testing.T, b []byte) *layout {
	t.Helper()
	var doc struct {
		Objects []map[string]any `json:"objects"`
		Edges   []map[string]any `json:"edges"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("dot -Tjson: %v", err)
	}
	l := &layout{objects: map[string]map[string]string{}, edges: map[string]map[string]string{}, pos: map[string][2]float64{}}
	attrs := func(m map[string]any) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			if strings.HasPrefix(k, "_") || slices.Contains(layoutKeys, k) {
				continue
			}
			out[k] = fmt.Sprint(v)
		}
		return out
	}
	names := make([]string, len(doc.Objects))
	for i, o := range doc.Objects {
		names[i] = fmt.Sprint(o["name"])
		l.objects[names[i]] = attrs(o)
		var x, y float64
		if p, ok := o["pos"].(string); ok {
			if _, err := fmt.Sscanf(p, "%g,%g", &x, &y); err == nil {
				l.pos[names[i]] = [2]float64{x, y}
			}
		}
	}
	for _, e := range doc.Edges {
		tail, head := int(e["tail"].(float64)), int(e["head"].(float64))
		key := names[tail] + ":" + fmt.Sprint(e["tailport"]) + " -> " + names[head]
		l.edges[key] = attrs(e)
		if e["constraint"] != "false" && e["style"] != "invis" {
			l.segs = append(l.segs, [2][2]float64{l.pos[names[tail]], l.pos[names[head]]})
		}
	}
	return l
}

// crossings counts the pairs of tree links whose straight lines cross, ends
// shared or not.
func (l *layout) crossings() int {
	side := func(a, b, c [2]float64) float64 { return (b[0]-a[0])*(c[1]-a[1]) - (b[1]-a[1])*(c[0]-a[0]) }
	n := 0
	for i, s := range l.segs {
		for _, u := range l.segs[i+1:] {
			if side(s[0], s[1], u[0])*side(s[0], s[1], u[1]) < 0 && side(u[0], u[1], s[0])*side(u[0], u[1], s[1]) < 0 {
				n++
			}
		}
	}
	return n
}

// TestTopoDot draws fixture machines with Graphviz: dot lays each out without a
// message, the devices of interest are drawn and nothing else is, VFs are
// folded into their PF, and the picture of a thousand functions stays small.
func TestTopoDot(t *testing.T) {
	dotBin := dotProgram(t)
	tests := []struct {
		machine  string
		maxNodes int
	}{
		{"dgx-h100", 40},
		{"large", 40}, // 1,028 functions, 960 of them VFs
		{"sriov-nic", 10},
		{"vmd-gpu", 20},
		{"amd-epyc", 30},
		{"dgx-h100-nonroot", 40},
		{"malformed", 40},
	}
	for _, tt := range tests {
		t.Run(tt.machine, func(t *testing.T) {
			n := loadMachine(t, tt.machine)
			var b bytes.Buffer
			if err := TopoDot(&b, n.Topology, n.P2P(), n.GPU); err != nil {
				t.Fatal(err)
			}
			l := parseLayout(t, renderDot(t, dotBin, b.String(), "json"))
			nodes := 0
			for name := range l.objects {
				if !strings.HasPrefix(name, "cluster_") {
					nodes++
				}
			}
			if nodes > tt.maxNodes {
				t.Errorf("%d nodes for %d functions, want at most %d", nodes, len(n.Topology.Devices), tt.maxNodes)
			}
			if c := l.crossings(); c > 0 {
				t.Errorf("%d crossings of the tree's links", c)
			}
			for _, d := range n.Interesting() {
				if l.objects[d.Address.String()] == nil {
					t.Errorf("device of interest %s is not drawn", d.Address)
				}
			}
			for _, d := range n.Topology.Devices {
				if d.IsVF() && l.objects[d.Address.String()] != nil {
					t.Errorf("VF %s is drawn; VFs are folded into their PF", d.Address)
				}
			}
		})
	}
}

// turnKey names where a pair's path turns in the picture: the drawn object
// that holds a pair turning at a bridge (a switch's table, a root port), or the
// cluster that holds a pair crossing a root complex, host bridges or NUMA nodes
// (the legend for those, the graph itself).
func turnKey(t *pcie.Topology, v p2pdma.Verdict, a, b *pcie.Device) string {
	if v.Common != nil {
		d := t.Device(*v.Common)
		for _, s := range t.Switches {
			if slices.Contains(s.Downstream, d) {
				return s.Upstream.Address.String()
			}
		}
		return d.Address.String()
	}
	switch {
	case a.HostBridge == b.HostBridge:
		return "cluster_" + a.HostBridge.Name
	case numaOfHost(a.HostBridge) == numaOfHost(b.HostBridge):
		return fmt.Sprintf("cluster_numa_%d", numaOfHost(a.HostBridge))
	}
	return "graph"
}

// verdictPlaces evaluates every pair of devices of interest and returns, for
// each place the picture shows verdicts at, the verdicts found there, and for
// each GPU and NIC their verdict.
func verdictPlaces(n *node.Node) map[string][]string {
	out := map[string][]string{}
	devs := n.Interesting()
	for e, v := range p2pdma.NewCalculator(n.Topology, n.P2P()).AllEnds(devs) {
		k := turnKey(n.Topology, v, e.Provider, e.Client)
		out[k] = append(out[k], e.Provider.Address.String()+">"+e.Client.Address.String()+" "+v.MapType.String())
		if e.Provider.IsGPU() && e.Client.IsNIC() {
			nic := e.Client.Address.String()
			out[nic] = append(out[nic], e.Provider.Address.String()+" "+v.MapType.String())
		}
	}
	return out
}

// TestTopoDotDiffersWhereVerdictsDo renders dgx-h100 (ACS redirect on the PEX
// switch ports: the report fails) and dgx-h100-acs-off (it passes) with
// Graphviz and compares what dot drew, object by object: the pictures differ
// exactly at the switches where a pair's kernel verdict changed, at the NICs
// whose GPUDirect RDMA verdict changed and at their GPUDirect edges, and
// nowhere else.
func TestTopoDotDiffersWhereVerdictsDo(t *testing.T) {
	dotBin := dotProgram(t)
	on, off := loadMachine(t, "dgx-h100"), loadMachine(t, "dgx-h100-acs-off")
	lays := map[string]*layout{}
	for name, n := range map[string]*node.Node{"on": on, "off": off} {
		var b bytes.Buffer
		if err := TopoDot(&b, n.Topology, n.P2P(), n.GPU); err != nil {
			t.Fatal(err)
		}
		lays[name] = parseLayout(t, renderDot(t, dotBin, b.String(), "json"))
	}
	// Where the verdicts differ, from p2pdma alone.
	vOn, vOff := verdictPlaces(on), verdictPlaces(off)
	var want []string
	for k := range vOn {
		if !slices.Equal(vOn[k], vOff[k]) {
			want = append(want, k)
		}
	}
	for e := range lays["on"].edges {
		if strings.Contains(lays["on"].edges[e]["style"], "dashed") {
			nic := e[strings.LastIndex(e, " -> ")+4:]
			if slices.Contains(want, nic) {
				want = append(want, e)
			}
		}
	}
	// Where the pictures differ.
	var got []string
	for name, a := range lays["on"].objects {
		if !cmp.Equal(a, lays["off"].objects[name]) {
			got = append(got, name)
		}
	}
	for name, a := range lays["on"].edges {
		if !cmp.Equal(a, lays["off"].edges[name]) {
			got = append(got, name)
		}
	}
	if len(lays["on"].objects) != len(lays["off"].objects) || len(lays["on"].edges) != len(lays["off"].edges) {
		t.Errorf("the pictures have %d and %d objects, %d and %d edges", len(lays["on"].objects), len(lays["off"].objects), len(lays["on"].edges), len(lays["off"].edges))
	}
	slices.Sort(want)
	slices.Sort(got)
	if len(want) == 0 {
		t.Fatal("no verdict differs between the two machines")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the pictures differ elsewhere than the verdicts (-verdicts differ +pictures differ):\n%s", diff)
	}
	// What the difference shows: ACS redirect marked, and the verdict colours.
	sw := lays["on"].objects["0000:18:00.0"]["label"]
	if !strings.Contains(sw, "ACS RR CR") || !strings.Contains(sw, verdictFill(p2pdma.ThruHostBridge)) {
		t.Errorf("dgx-h100's switch 0000:18:00.0 shows no ACS redirect or no thru-host-bridge verdict:\n%s", sw)
	}
	sw = lays["off"].objects["0000:18:00.0"]["label"]
	if strings.Contains(sw, "ACS RR CR") || !strings.Contains(sw, verdictFill(p2pdma.BusAddr)) {
		t.Errorf("dgx-h100-acs-off's switch 0000:18:00.0 shows ACS redirect or no bus-addr verdict:\n%s", sw)
	}
}

// TestTopoDotLinksAndNVLink: a downgraded link is red with its capability, the
// GPUs' NVLinks go to one NVSwitch fabric node, and GPUs joined directly get one
// edge per pair.
func TestTopoDotLinksAndNVLink(t *testing.T) {
	dotBin := dotProgram(t)
	n := loadMachine(t, "degraded-link")
	var b bytes.Buffer
	if err := TopoDot(&b, n.Topology, n.P2P(), nil); err != nil {
		t.Fatal(err)
	}
	l := parseLayout(t, renderDot(t, dotBin, b.String(), "json"))
	red := 0
	for _, e := range l.edges {
		if e["color"] == "red" && strings.Contains(e["label"], "↓") {
			red++
		}
	}
	if red == 0 {
		t.Errorf("degraded-link: no link drawn as downgraded:\n%s", b.String())
	}

	dgx := loadMachine(t, "dgx-h100")
	gpus := dgx.Topology.GPUs()
	facts := &gpu.Facts{}
	for i, g := range gpus {
		a := g.Address
		nv := &gpu.NVLink{Active: 18}
		for k := range 18 {
			nv.Links = append(nv.Links, gpu.NVLinkPeer{Link: k, RemoteType: "switch"})
		}
		if i == 0 { // and one link straight to the next GPU
			r := gpus[1].Address
			nv.Links = append(nv.Links, gpu.NVLinkPeer{Link: 18, Remote: &r, RemoteType: "gpu"})
		}
		facts.GPUs = append(facts.GPUs, gpu.GPU{Index: i, Address: &a, NVLink: nv})
	}
	b.Reset()
	if err := TopoDot(&b, dgx.Topology, dgx.P2P(), facts); err != nil {
		t.Fatal(err)
	}
	l = parseLayout(t, renderDot(t, dotBin, b.String(), "json"))
	fabric, direct := 0, 0
	for k, e := range l.edges {
		switch {
		case strings.HasSuffix(k, "-> nvswitch") && e["label"] == "NV18":
			fabric++
		case e["color"] == "purple" && e["label"] == "NV1":
			direct++
		}
	}
	if fabric != len(gpus) || direct != 1 {
		t.Errorf("NVLink edges: %d into the fabric (want %d), %d direct (want 1)", fabric, len(gpus), direct)
	}
}

// TestTopoDotHostileNames: names read from the machine are escaped in the HTML
// labels, and Graphviz still reads the picture.
func TestTopoDotHostileNames(t *testing.T) {
	dotBin := dotProgram(t)
	m := fixture.New()
	hb := m.HostBridge(0, 0, 0)
	rp := hb.RootPort(1, 0, fixture.Link(4, 16))
	rp.Endpoint(fixture.ID(0x10de, 0x2330), fixture.Class(0x030200), fixture.Driver(`nv</FONT>"<B>&x`+"\x1b[2J"), fixture.Link(4, 16))
	rp2 := hb.RootPort(2, 0, fixture.Link(4, 16))
	rp2.Endpoint(fixture.ID(0x10de, 0x2330), fixture.Class(0x030200), fixture.Link(4, 16))
	n := testnode.Machine(t, m, node.Options{NoNames: true})
	n.Topology.Devices[2].DeviceName = "<TABLE>\"'&"
	var b bytes.Buffer
	if err := TopoDot(&b, n.Topology, n.P2P(), nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "</FONT>\"<B>") || strings.Contains(b.String(), "\x1b") {
		t.Fatalf("a name is not escaped:\n%s", b.String())
	}
	renderDot(t, dotBin, b.String(), "json")
}

// TestDiffDot marks what changed on the golden's picture.
func TestDiffDot(t *testing.T) {
	dotBin := dotProgram(t)
	n := loadMachine(t, "dgx-h100")
	gpu0 := n.Topology.GPUs()[0].Address
	nic0 := n.Topology.NICs()[0].Address
	port := n.Topology.Device(gpu0).Parent.Address
	rep := DiffReport{Golden: DiffSide{Source: "snapshot golden.tar.gz"}, Node: DiffSide{Source: "this machine"}}
	rep.Changes = []drift.Change{
		{Kind: "link", What: "changed", Device: &drift.End{Place: "p", Role: "gpu", Golden: &gpu0, Node: &gpu0}, Fact: "link", Golden: "Gen5 x16", Node: "Gen4 x8 (downgraded)"},
		{Kind: "acs", What: "changed", Device: &drift.End{Place: "q", Role: "switch-port", Golden: &port, Node: &port}, Fact: "ACS Control",
			Golden: "SrcValid+ TransBlk- ReqRedir+", Node: "SrcValid+ TransBlk- ReqRedir-"},
		{Kind: "pairs", What: "changed", Device: &drift.End{Place: "p", Golden: &gpu0}, Peer: &drift.End{Place: "r", Golden: &nic0},
			Fact: "kernel verdict", Golden: "thru-host-bridge, distance 4", Node: "bus-addr, distance 4"},
		{Kind: "versions", What: "changed", Fact: "kernel", Golden: "6.8.0-60-generic", Node: "6.8.0-61-generic"},
		{Kind: "devices", What: "missing", Device: &drift.End{Place: "s", Role: "nvme", Golden: &n.Topology.NVMe()[0].Address}},
	}
	var b bytes.Buffer
	if err := DiffDot(&b, n.Topology, n.P2P(), nil, rep); err != nil {
		t.Fatal(err)
	}
	l := parseLayout(t, renderDot(t, dotBin, b.String(), "json"))
	for _, want := range []struct{ object, text string }{
		{gpu0.String(), "Δ link Gen5 x16 → Gen4 x8 (downgraded)"},
		{n.Topology.Device(port).Parent.Address.String(), "Δ ACS Control ReqRedir+ → ReqRedir-"},
		{nic0.String(), "Δ kernel verdict thru-host-bridge, distance 4 → bus-addr, distance 4"},
		{n.Topology.NVMe()[0].Address.String(), "Δ missing on the node"},
		{"0000:18:00.0", "Δ 1 changed: kernel verdict"},
	} {
		if !strings.Contains(l.objects[want.object]["label"], htmlText(want.text)) {
			t.Errorf("%s does not show %q:\n%s", want.object, want.text, l.objects[want.object]["label"])
		}
	}
	if !strings.Contains(b.String(), htmlText("Δ kernel 6.8.0-60-generic → 6.8.0-61-generic")) {
		t.Errorf("the legend does not list the node-wide change")
	}
}

// TestDotRoleColors keeps one colour per role.
func TestDotRoleColors(t *testing.T) {
	seen := map[string]matrix.Role{}
	for _, r := range []matrix.Role{matrix.GPU, matrix.NIC, matrix.NVMe, matrix.Accelerator} {
		if o, ok := seen[roleColor(r)]; ok {
			t.Errorf("%v and %v share colour %s", r, o, roleColor(r))
		}
		seen[roleColor(r)] = r
	}
}

func TestDotString(t *testing.T) {
	for in, want := range map[string]string{
		"plain":             `"plain"`,
		"two\nlines":        `"two\nlines"`,
		`quote " and \ `:    `"quote \" and \\ "`,
		"esc\x1b[2J driver": `"esc\\x1b[2J driver"`,
	} {
		if got := dotString(in); got != want {
			t.Errorf("dotString(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestDotPictures keeps the pictures under docs/ in step with the code: the DOT
// of dgx-h100 that the README shows, and of a drifted dgx-h100-acs-off (GPU3 at
// Gen4 x8 after a repair, ACS redirect back on at GPU4's switch after a BIOS
// update) against its golden, which docs/diff.md shows. -update rewrites the DOT
// files and renders them to PNG with Graphviz.
func TestDotPictures(t *testing.T) {
	dgx := loadMachine(t, "dgx-h100")
	var b bytes.Buffer
	if err := TopoDot(&b, dgx.Topology, dgx.P2P(), dgx.GPU); err != nil {
		t.Fatal(err)
	}
	picture(t, "../docs/dgx-h100", b.Bytes())

	golden := loadMachine(t, "dgx-h100-acs-off")
	m := fixture.DGXH100ACSOff()
	m.Func("gpu3").Set(fixture.Trained(4, 8))
	for _, l := range []string{"gpu4", "nic4"} {
		m.Func(l).Parent().Set(fixture.ACS(0x5f, 0x1d))
	}
	n := testnode.Machine(t, m, node.Options{PCIIDs: "../internal/pciids/testdata/pci.ids"})
	gs, ns := drift.Summarize(golden), drift.Summarize(n)
	rep := NewDiffReport(DiffSide{Source: "snapshot golden.tar.gz", Signature: gs.Signature().String()},
		DiffSide{Source: "snapshot node07.tar.gz", Signature: ns.Signature().String()}, drift.Compare(gs, ns), false)
	b.Reset()
	if err := DiffDot(&b, golden.Topology, golden.P2P(), golden.GPU, rep); err != nil {
		t.Fatal(err)
	}
	picture(t, "../docs/diff-dgx-h100", b.Bytes())
}

// picture compares src with base.dot and, under -update, writes it and renders
// base.png from it.
func picture(t *testing.T, base string, src []byte) {
	t.Helper()
	testsupport.Golden(t, base+".dot", src)
	if !testsupport.Update() {
		if _, err := os.Stat(base + ".png"); err != nil {
			t.Errorf("%v (go test -update renders it)", err)
		}
		return
	}
	png := renderDot(t, dotProgram(t), string(src), "png")
	if err := os.WriteFile(base+".png", png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCrossings checks the crossing count the picture tests rely on.
func TestCrossings(t *testing.T) {
	l := &layout{segs: [][2][2]float64{
		{{0, 0}, {10, 10}}, {{0, 10}, {10, 0}}, // cross
		{{0, 20}, {10, 20}}, {{0, 20}, {10, 30}}, // share an end
	}}
	if c := l.crossings(); c != 1 {
		t.Errorf("%d crossings, want 1", c)
	}
}

// TestTopoDotManyDevices: past maxDotPairDevices devices of interest the
// picture says the pairs were not evaluated instead of keeping a verdict per
// pair.
func TestTopoDotManyDevices(t *testing.T) {
	n := manyGPUs(t, maxDotPairDevices+8)
	var b bytes.Buffer
	if err := TopoDot(&b, n.Topology, n.P2P(), nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), fmt.Sprintf("%d devices of interest: the pairs", maxDotPairDevices+8)) {
		t.Error("the legend does not say the pairs were not evaluated")
	}
}

// manyGPUs loads a machine of count GPUs on root buses, 256 functions to a bus,
// from its snapshot in memory.
func manyGPUs(t *testing.T, count int) *node.Node {
	t.Helper()
	m := fixture.New()
	var hb *fixture.HostBridge
	for i := range count {
		if i%256 == 0 {
			hb = m.HostBridge(0, uint8(i/256*0x40), 0)
		}
		hb.Endpoint(uint8(i%256/8), uint8(i%8), fixture.ID(0x10de, 0x2330), fixture.Class(0x030200))
	}
	var b bytes.Buffer
	if err := m.WriteSnapshot(&b); err != nil {
		t.Fatal(err)
	}
	root, err := snapshot.Read(&b)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	n, err := node.Load(root, node.Options{NoNames: true})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
