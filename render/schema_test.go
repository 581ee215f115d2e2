package render

import (
	"bytes"
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/matrix"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pathclass"
	"github.com/p2pkit/p2pkit/pcie"
)

// loadMachine writes the named fixture machine and loads it as p2pcheck does,
// naming devices from the test pci.ids.
func loadMachine(t testing.TB, name string) *node.Node {
	t.Helper()
	return testnode.Load(t, name, node.Options{PCIIDs: "../internal/pciids/testdata/pci.ids"})
}

// schemas compiles the committed schemas of the tree commands.
func schemas(t *testing.T) map[string]func([]byte) error {
	t.Helper()
	out := map[string]func([]byte) error{}
	for _, name := range []string{"topo", "pairs", "pair", "matrix"} {
		out[name] = testsupport.Schema(t, "../schema/"+name+".v1.json")
	}
	return out
}

// outputs renders topo, pairs, one pair and the matrix of n as JSON.
func outputs(t *testing.T, n *node.Node) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	var b bytes.Buffer
	if err := TopoJSON(&b, n.Topology, n.Warnings); err != nil {
		t.Fatal(err)
	}
	out["topo"] = bytes.Clone(b.Bytes())
	calc := p2pdma.NewCalculator(n.Topology, n.P2P())
	devs := n.Interesting()
	if len(devs) < 2 {
		devs = n.Topology.Endpoints()
	}
	b.Reset()
	err := PairsJSON(&b, func(yield func(Pair) bool) {
		for _, x := range devs {
			for _, y := range devs {
				if x != y && !yield(Pair{Verdict: calc.Calc(x, y), PathType: pathclass.NVSMI(x, y, 0).String()}) {
					return
				}
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	out["pairs"] = bytes.Clone(b.Bytes())
	if len(devs) >= 2 {
		x, y := devs[0], devs[len(devs)-1]
		b.Reset()
		if err := PairJSON(&b, pairReport(n, x, y)); err != nil {
			t.Fatal(err)
		}
		out["pair"] = bytes.Clone(b.Bytes())
	}
	b.Reset()
	nv := func(a, b *pcie.Device) int { return 2 } // every GPU pair NV2, to cover NV# cells
	if err := MatrixJSON(&b, matrix.Build(n.Topology.Devices, nv)); err != nil {
		t.Fatal(err)
	}
	out["matrix"] = bytes.Clone(b.Bytes())
	return out
}

// TestSchemas validates the JSON of topo, pairs, pair and matrix on every fixture
// machine (the large one excepted: it adds only more of the same) against
// schema/<name>.v1.json, and checks that each schema rejects what it must.
func TestSchemas(t *testing.T) {
	sch := schemas(t)
	for _, name := range fixture.Names() {
		if name == "large" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			for cmd, b := range outputs(t, loadMachine(t, name)) {
				if err := sch[cmd](b); err != nil {
					t.Errorf("%s JSON does not match schema/%s.v1.json: %v", cmd, cmd, err)
				}
			}
		})
	}
	t.Run("rejects", func(t *testing.T) {
		out := outputs(t, loadMachine(t, "degraded-link"))
		for _, bad := range []struct{ cmd, from, to string }{
			{"topo", `"schema_version": "1"`, `"schema_version": "2"`},
			{"topo", `"downgraded": true`, `"downgraded": "yes"`},
			{"topo", `"address": "0000:00:00.0"`, `"address": "00:00.0"`},
			{"pairs", `"map_type":"bus-addr"`, `"map_type":"p2p"`},
			{"pairs", `"schema_version":"1"`, `"schema_version":1`},
			{"pair", `"path_type": "PIX"`, `"path_type": "NV2"`},
			{"pair", `"common_upstream": false`, `"common_upstream": false, "extra": 1`},
			{"matrix", `"role": "gpu"`, `"role": "GPU"`},
			{"matrix", `"NV2"`, `"NVx"`},
		} {
			good := string(out[bad.cmd])
			if !strings.Contains(good, bad.from) {
				t.Fatalf("%s JSON has no %s:\n%s", bad.cmd, bad.from, good)
			}
			if err := sch[bad.cmd]([]byte(strings.Replace(good, bad.from, bad.to, 1))); err == nil {
				t.Errorf("schema/%s.v1.json accepted %s", bad.cmd, bad.to)
			}
		}
	})
}
