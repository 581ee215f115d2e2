package render

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/drift"
	"github.com/p2pkit/p2pkit/pcie"
)

// TestDiffText: identical changes of several devices share a line, a pair's
// two directions are one ↔, a device renumbered shows both addresses, and
// every value read from a machine is escaped.
func TestDiffText(t *testing.T) {
	a := func(s string) *pcie.Address {
		x, err := pcie.ParseAddress(s)
		if err != nil {
			t.Fatal(err)
		}
		return &x
	}
	port := func(g, n string) *drift.End {
		return &drift.End{Place: "p" + g, Role: drift.RoleSwitchPort, Golden: a(g), Node: a(n)}
	}
	gpu := &drift.End{Place: "g", Role: drift.RoleGPU, Label: "GPU0", Golden: a("1a:00.0"), Node: a("2a:00.0")}
	nic := &drift.End{Place: "n", Role: drift.RoleRDMANIC, Label: "NIC0", Golden: a("1b:00.0"), Node: a("2b:00.0")}
	acs := func(e *drift.End) drift.Change {
		return drift.Change{Kind: drift.ACS, Severity: drift.SeverityWarn, What: "changed", Device: e, Fact: "ACS Control",
			Golden: "SrcValid- ReqRedir-", Node: "SrcValid+ ReqRedir+", Note: "ACS redirect now on (RR)"}
	}
	pair := func(x, y *drift.End) drift.Change {
		return drift.Change{Kind: drift.Pairs, Severity: drift.SeverityVerdict, What: "changed", Device: x, Peer: y,
			Fact: "kernel verdict", Golden: "bus-addr, distance 4", Node: "thru-host-bridge, distance 4"}
	}
	r := drift.Result{Changes: []drift.Change{
		acs(port("19:01.0", "29:01.0")), acs(port("19:00.0", "29:00.0")),
		{Kind: drift.Versions, Severity: drift.SeverityWarn, What: "changed", Device: gpu, Fact: "driver", Golden: "nvidia", Node: "evil\x1b[2J"},
		pair(gpu, nic), pair(nic, gpu),
	}, Gaps: []drift.Gap{{Kind: drift.NVLink, Fact: "NVLinks", Side: "node", Why: "no NVML facts", Count: 1, Example: gpu, Blocking: true}}}
	var b bytes.Buffer
	if err := DiffText(&b, NewDiffReport(DiffSide{Source: "snapshot g.tar.gz", Signature: "aa"}, DiffSide{Source: "this machine", Signature: "bb"}, r, false)); err != nil {
		t.Fatal(err)
	}
	want := `golden: snapshot g.tar.gz (signature aa)
node:   this machine (signature bb)

ACS (redirect sends peer traffic up to the root complex):
  ACS Control SrcValid- ReqRedir- → SrcValid+ ReqRedir+ (ACS redirect now on (RR))
    2 switch ports: 0000:29:00.0 (golden 0000:19:00.0), 0000:29:01.0 (golden 0000:19:01.0)

versions (kernel, drivers, modules; IDs and revisions the firmware shows):
  GPU0 0000:2a:00.0 (golden 0000:1a:00.0): driver nvidia → evil\x1b[2J

pairs (the kernel's P2PDMA verdict, the path class, NCCL's transport):
  GPU0 ↔ NIC0: kernel verdict bus-addr, distance 4 → thru-host-bridge, distance 4

not compared:
  NVLinks of GPU0 0000:2a:00.0 (golden 0000:1a:00.0): not known on the node: no NVML facts (the golden records it: the node cannot be shown to match)

result: drift that changes verdicts (exit 1)
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("DiffText (-want +got):\n%s", diff)
	}
}

// TestFleetText: a large group names its first nodes and counts the rest, and
// an unreadable node makes the outcome unknown when no verdict changed.
func TestFleetText(t *testing.T) {
	var maj []int
	for i := range 20 {
		if i != 7 {
			maj = append(maj, i)
		}
	}
	fr := &drift.FleetResult{Majority: true, Groups: []drift.Group{{Nodes: maj}, {Nodes: []int{7}, Result: &drift.Result{Changes: []drift.Change{
		{Kind: drift.Versions, Severity: drift.SeverityWarn, What: "changed", Fact: "kernel", Golden: "6.8.0-60-generic", Node: "6.8.0-61-generic"},
	}}}}, Unreadable: []drift.Unreadable{{Node: 20, Err: "snapshot: gzip: invalid header"}}}
	rep := NewFleetReport(fr, 21, func(i int) string { return fmt.Sprintf("n%02d", i) }, false)
	var b bytes.Buffer
	if err := FleetText(&b, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"fleet: 21 nodes, 2 fabric signatures\nmajority: 19 of 21 nodes, signature 0000000000000000\n",
		"1 node: n07 (signature 0000000000000000): drift that changes no verdict: versions 1\n",
		"    kernel 6.8.0-60-generic → 6.8.0-61-generic\n",
		"could not read:\n  n20: snapshot: gzip: invalid header\n",
		"result: could not compare what the golden records (exit 3)\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("fleet text lacks %q:\n%s", want, b.String())
		}
	}
	if rep.ExitCode != 3 {
		t.Errorf("exit code %d, want 3", rep.ExitCode)
	}
	if got := nodeList(rep.Groups[0]); got != "19 nodes: n00, n01, n02, n03, n04, n05, n06, n08 and 11 more" {
		t.Errorf("nodeList = %q", got)
	}
}
