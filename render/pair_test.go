package render

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pathclass"
	"github.com/p2pkit/p2pkit/pcie"
)

// pairReport is what p2pcheck pair explains for provider x and client y of n.
func pairReport(n *node.Node, x, y *pcie.Device) PairReport {
	calc := p2pdma.NewCalculator(n.Topology, n.P2P())
	return PairReport{Path: n.Topology.Path(x, y), Verdict: calc.Calc(x, y), Reverse: calc.Calc(y, x),
		NVSMI: pathclass.NVSMI(x, y, 0).String(), NCCL: pathclass.NCCL(x, y).String()}
}

// fixturePair loads the named fixture and explains the pair of the functions it
// labelled provider and client.
func fixturePair(t *testing.T, machine, provider, client string) PairReport {
	t.Helper()
	m := testsupport.Fixture(t, machine)
	n := testnode.Machine(t, m, node.Options{NoNames: true})
	return pairReport(n, testsupport.Device(t, n.Topology, m, provider), testsupport.Device(t, n.Topology, m, client))
}

// missingLines returns the lines of want that text does not hold in that order,
// and the lines of text that start with one of the prefixes of notWant.
func missingLines(text string, want, notWant []string) (missing, unwanted []string) {
	lines := strings.Split(text, "\n")
	i := 0
	for _, w := range want {
		j := i
		for j < len(lines) && lines[j] != w {
			j++
		}
		if j == len(lines) {
			missing = append(missing, w)
			continue
		}
		i = j + 1
	}
	for _, l := range lines {
		for _, p := range notWant {
			if strings.HasPrefix(l, p) {
				unwanted = append(unwanted, l)
			}
		}
	}
	return missing, unwanted
}

const acsRedirCtl = "ACSCtl SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"

// TestPairText explains pairs of the fixture machines hop by hop: the climb to
// the turning point (a common bridge or the host bridges), the functions whose
// ACS redirect forces the host bridge, the verdict, the path classes, what could
// not be read, and the fix only where ACS redirect is the cause.
func TestPairText(t *testing.T) {
	tests := []struct {
		name                      string
		machine, provider, client string
		edit                      func(*PairReport) // nil, or a change of the pair
		want                      []string          // lines the text holds, in this order
		notWant                   []string          // prefixes no line may start with
	}{
		{
			name: "ACS redirect below a common switch", machine: "dgx-h100", provider: "gpu0", client: "nic0",
			want: []string{
				"path:",
				"  ↑ 0000:1a:00.0 Endpoint · Gen5 x16",
				"  ↑ 0000:19:00.0 Downstream Port · Gen5 x16 · " + acsRedirCtl + " · ← ACS redirect",
				"  ◆ 0000:18:00.0 Upstream Port · Gen5 x16 · common upstream bridge: the path turns here",
				"  ↓ 0000:19:01.0 Downstream Port · Gen5 x16 · " + acsRedirCtl + " · ← ACS redirect",
				"  ↓ 0000:1b:00.0 Endpoint · Gen5 x16",
				"  narrowest link: Gen5 x16",
				"kernel verdict:  thru-host-bridge, distance 4",
				"path class:      PIX (nvidia-smi)",
				`fix (boot):      add the kernel parameter "pci=disable_acs_redir=0000:19:00.0;0000:19:01.0"`,
				"fix (runtime):   setpci -s 0000:19:00.0 ECAP_ACS+6.w=0000:002c",
				"                 setpci -s 0000:19:01.0 ECAP_ACS+6.w=0000:002c",
				"                 (both loosen IOMMU isolation; the runtime form is lost at reboot and undone when the kernel restores the port's state)",
			},
			notWant: []string{"reverse", "unknown:"},
		},
		{
			name: "across two host bridges", machine: "dgx-h100", provider: "gpu0", client: "gpu4",
			want: []string{
				"  ↑ 0000:1a:00.0 Endpoint · Gen5 x16",
				"  ↑ 0000:15:01.0 Root Port · Gen5 x16 · " + acsRedirCtl,
				"  ◆ no common bridge: the path crosses host bridges pci0000:15 and pci0000:9a",
				"  ↓ 0000:9a:01.0 Root Port · Gen5 x16 · " + acsRedirCtl,
				"  ↓ 0000:9f:00.0 Endpoint · Gen5 x16",
				"kernel verdict:  thru-host-bridge, distance 12",
				"path class:      SYS (nvidia-smi)",
			},
			notWant: []string{"fix", "unknown:", "reverse", "  ◆ 0000"},
		},
		{
			name: "AMD Zen host bridge", machine: "amd-epyc", provider: "gpu0", client: "gpu2",
			want: []string{
				"  ◆ no common bridge: the path crosses host bridges pci0000:00 and pci0000:80",
				"kernel verdict:  thru-host-bridge, distance 4",
				"why:             client and provider do not share an upstream bridge; the CPU (AuthenticAMD family 0x19) is AMD Zen or newer, so the kernel sends the traffic through the host bridge",
			},
			notWant: []string{"fix", "unknown:"},
		},
		{
			name: "ACS not readable", machine: "dgx-h100-nonroot", provider: "gpu0", client: "nic0",
			want: []string{
				"  ↑ 0000:1a:00.0 Gen5 x16 · ACS unknown",
				"  ◆ 0000:18:00.0 Gen5 x16 · ACS unknown · common upstream bridge: the path turns here",
				"kernel verdict:  unknown, distance 4",
				"unknown:         ACS Control of 0000:1a:00.0 was not read (config space past 64 bytes needs CAP_SYS_ADMIN)",
			},
			notWant: []string{"fix", "  narrowest link: Gen4"},
		},
		{
			name: "downgraded link below a common switch", machine: "degraded-link", provider: "gpu0", client: "gpu1",
			want: []string{
				"  ◆ 0000:01:00.0 Upstream Port · Gen5 x16 · common upstream bridge: the path turns here",
				"  ↓ 0000:02:01.0 Downstream Port · Gen4 x8 (max Gen5 x16)",
				"  ↓ 0000:04:00.0 Endpoint · Gen4 x8 (max Gen5 x16) (downgraded)",
				"  narrowest link: Gen4 x8",
				"kernel verdict:  bus-addr, distance 4",
				"path class:      PIX (nvidia-smi)",
			},
			notWant: []string{"fix", "unknown:", "reverse"},
		},
		{
			name: "asymmetric verdict and NCCL class", machine: "degraded-link", provider: "gpu0", client: "gpu1",
			edit: func(r *PairReport) {
				r.Reverse.MapType, r.Reverse.Distance = p2pdma.NotSupported, 4
				r.NCCL = "PXB"
			},
			want: []string{
				"kernel verdict:  bus-addr, distance 4",
				"reverse (client as provider): not-supported, distance 4",
				"path class:      PIX (nvidia-smi), PXB (NCCL)",
			},
		},
		{
			name: "terminal controls in the reason", machine: "degraded-link", provider: "gpu0", client: "gpu1",
			edit: func(r *PairReport) {
				r.Verdict.Reason = "a\x1b[2Jb"
				r.Verdict.Unknowns = []p2pdma.UnknownFact{{Kind: p2pdma.WhitelistVersion, Detail: "c\rd"}}
			},
			want:    []string{"why:             " + Escape("a\x1b[2Jb"), "unknown:         " + Escape("c\rd")},
			notWant: []string{"why:             a\x1b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fixturePair(t, tt.machine, tt.provider, tt.client)
			if tt.edit != nil {
				tt.edit(&r)
			}
			var plain, color bytes.Buffer
			if err := PairText(&plain, r, Style{}); err != nil {
				t.Fatal(err)
			}
			if err := PairText(&color, r, Style{Color: true}); err != nil {
				t.Fatal(err)
			}
			missing, unwanted := missingLines(plain.String(), tt.want, tt.notWant)
			if len(missing) > 0 || len(unwanted) > 0 {
				t.Errorf("missing (in order) %q\nunwanted %q\nin:\n%s", missing, unwanted, plain.String())
			}
			if strings.Contains(plain.String(), "\x1b") || !strings.Contains(color.String(), "\x1b[") {
				t.Errorf("escape sequences: want them in the colored text only")
			}
		})
	}
}

// TestPairJSON checks the hops, the turning point and the verdicts PairJSON
// writes for programs: null where a fact (port type) was not read or there is no
// common bridge, an empty list where no function redirects.
func TestPairJSON(t *testing.T) {
	type hop struct {
		Address     string  `json:"address"`
		PortType    *string `json:"port_type"`
		ACSRedirect bool    `json:"acs_redirect"`
		Common      bool    `json:"common_upstream"`
		ACS         struct {
			Known bool `json:"known"`
		} `json:"acs"`
	}
	type verdict struct {
		MapType     string   `json:"map_type"`
		Distance    int      `json:"distance"`
		ACSRedirect []string `json:"acs_redirect"`
	}
	type doc struct {
		SchemaVersion string  `json:"schema_version"`
		Provider      string  `json:"provider"`
		Client        string  `json:"client"`
		Hops          []hop   `json:"hops"`
		Common        *string `json:"common_upstream"`
		Verdict       verdict `json:"verdict"`
		Reverse       verdict `json:"reverse"`
		PathType      string  `json:"path_type"`
		NCCLPathType  string  `json:"nccl_path_type"`
	}
	str := func(s string) *string { return &s }
	known := func(h hop) hop { h.ACS.Known = true; return h }
	tests := []struct {
		name                      string
		machine, provider, client string
		want                      doc
	}{
		{"ACS redirect below a common switch", "dgx-h100", "gpu0", "nic0", doc{
			SchemaVersion: PairSchemaVersion, Provider: "0000:1a:00.0", Client: "0000:1b:00.0",
			Hops: []hop{
				known(hop{Address: "0000:1a:00.0", PortType: str("Endpoint")}),
				known(hop{Address: "0000:19:00.0", PortType: str("Downstream Port"), ACSRedirect: true}),
				known(hop{Address: "0000:18:00.0", PortType: str("Upstream Port"), Common: true}),
				known(hop{Address: "0000:19:01.0", PortType: str("Downstream Port"), ACSRedirect: true}),
				known(hop{Address: "0000:1b:00.0", PortType: str("Endpoint")}),
			},
			Common:   str("0000:18:00.0"),
			Verdict:  verdict{"thru-host-bridge", 4, []string{"0000:19:00.0", "0000:19:01.0"}},
			Reverse:  verdict{"thru-host-bridge", 4, []string{"0000:19:01.0", "0000:19:00.0"}},
			PathType: "PIX", NCCLPathType: "PIX",
		}},
		{"across host bridges", "amd-epyc", "gpu0", "gpu2", doc{
			SchemaVersion: PairSchemaVersion, Provider: "0000:01:00.0", Client: "0000:81:00.0",
			Hops: []hop{
				known(hop{Address: "0000:01:00.0", PortType: str("Endpoint")}),
				known(hop{Address: "0000:00:01.1", PortType: str("Root Port")}),
				known(hop{Address: "0000:80:01.1", PortType: str("Root Port")}),
				known(hop{Address: "0000:81:00.0", PortType: str("Endpoint")}),
			},
			Verdict:  verdict{"thru-host-bridge", 4, []string{}},
			Reverse:  verdict{"thru-host-bridge", 4, []string{}},
			PathType: "SYS", NCCLPathType: "SYS",
		}},
		{"ACS not readable", "dgx-h100-nonroot", "gpu0", "nic0", doc{
			SchemaVersion: PairSchemaVersion, Provider: "0000:1a:00.0", Client: "0000:1b:00.0",
			Hops: []hop{
				{Address: "0000:1a:00.0"},
				{Address: "0000:19:00.0"},
				{Address: "0000:18:00.0", Common: true},
				{Address: "0000:19:01.0"},
				{Address: "0000:1b:00.0"},
			},
			Common:   str("0000:18:00.0"),
			Verdict:  verdict{"unknown", 4, []string{}},
			Reverse:  verdict{"unknown", 4, []string{}},
			PathType: "PIX", NCCLPathType: "PIX",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := PairJSON(&b, fixturePair(t, tt.machine, tt.provider, tt.client)); err != nil {
				t.Fatal(err)
			}
			var got doc
			if err := json.Unmarshal(b.Bytes(), &got); err != nil {
				t.Fatalf("%v in\n%s", err, b.Bytes())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PairJSON (-want +got):\n%s", diff)
			}
		})
	}
}
