package vmtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/snapshot"
	"github.com/p2pkit/p2pkit/sysfs"
)

// Guest size: small enough for two shared cores, large enough for a 64 MiB CMB's
// ZONE_DEVICE memory map.
const (
	guestMemMiB = 512
	guestSMP    = 1
)

// The checks below run in the VM tier on fresh captures (vm_test.go) and in the unit
// tier on the captures kept under testdata/vm (kept_test.go).

// checkFacts compares what the kernel decided at boot (busybox view) with the entry:
// ACS Control on exactly the root ports, IOMMU groups exactly with a vIOMMU, NUMA
// nodes from pxb-pcie.
func checkFacts(t *testing.T, topo *Topology, k Kernel, v View) {
	numa := map[string]int{"pci0000:00": -1}
	for _, n := range topo.Root {
		if n.Kind == PXB {
			numa[fmt.Sprintf("pci0000:%02x", n.BusNr)] = n.NUMANode
		}
	}
	for _, f := range v.Funcs {
		got := v.Facts[f.Addr]
		wantACS := fmt.Sprintf("%04x", topo.WantACSAt(k, f.Addr))
		switch {
		case f.Type == "root-port" && got.ACS != wantACS:
			t.Errorf("%s root port: ACS Control %q, want %q", f.Addr, got.ACS, wantACS)
		case f.Type != "root-port" && got.ACS != "":
			t.Errorf("%s %s %s: unexpected ACS capability (Control %s)", f.Addr, f.ID, f.Type, got.ACS)
		}
		if topo.IOMMU != (got.IOMMUGroup >= 0) {
			t.Errorf("%s: IOMMU group %d with vIOMMU %t", f.Addr, got.IOMMUGroup, topo.IOMMU)
		}
		if want, ok := numa[f.HostBridge]; !ok || got.NUMANode != want {
			t.Errorf("%s on %s: NUMA node %d, want %d", f.Addr, f.HostBridge, got.NUMANode, want)
		}
	}
}

// checkOracleShape checks the oracle's report itself: one verdict for every ordered
// pair of type-0 functions the guest has (self pairs included, distance 0) and the
// CPU rule the entry expects.
func checkOracleShape(t *testing.T, topo *Topology, v View, o Oracle) {
	if o.CPUSupportsP2PDMA != topo.CPUP2P {
		t.Errorf("cpu_supports_p2pdma=%t, want %t for -cpu %s", o.CPUSupportsP2PDMA, topo.CPUP2P, topo.CPU)
	}
	var endpoints []pcie.Address
	for _, f := range v.Funcs {
		// VFs are enabled after the oracle ran (a late_initcall).
		if f.Bus == "" && f.PhysFn == "" {
			endpoints = append(endpoints, f.Addr)
		}
	}
	want := map[[2]pcie.Address]bool{}
	for _, p := range endpoints {
		for _, c := range endpoints {
			want[[2]pcie.Address{p, c}] = true
		}
	}
	for _, vd := range o.Verdicts {
		key := [2]pcie.Address{vd.Provider, vd.Client}
		if !want[key] {
			t.Errorf("oracle judged %s, which is not a pair of type-0 functions", vd)
		}
		delete(want, key)
		if vd.Provider == vd.Client && (vd.Distance != 0 || vd.MapType != "bus-addr") {
			t.Errorf("oracle self pair %s: want bus-addr 0", vd)
		}
	}
	for k := range want {
		t.Errorf("oracle has no verdict for %s %s", k[0], k[1])
	}
}

// checkSnapshot loads the snapshot p2pcheck wrote in the guest through sysfs and
// pcie, exactly as `p2pcheck --snapshot` would, and compares it with the entry and
// with the busybox view: the tree, ACS Control, IOMMU groups and NUMA nodes.
func checkSnapshot(t *testing.T, topo *Topology, dump View, archive []byte) {
	fsys, err := snapshot.Read(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	recs, err := sysfs.New(fsys).PCIRecords()
	if err != nil {
		t.Fatal(err)
	}
	tp := pcie.NewTopology(recs)
	for _, err := range tp.Errors {
		t.Errorf("snapshot topology: %v", err)
	}
	snap := ViewOf(tp)
	for _, d := range DiffFuncs(topo.Want(), snap.Funcs) {
		t.Errorf("snapshot tree: %s", d)
	}
	for _, f := range dump.Funcs {
		if got, want := snap.Facts[f.Addr], dump.Facts[f.Addr]; got != want {
			t.Errorf("%s: snapshot facts %+v, kernel (busybox) %+v", f.Addr, got, want)
		}
	}
}

// checkTopo checks `p2pcheck topo --format json`, p2pcheck's view of the live guest:
// its tree and switches against the entry, its ACS, IOMMU group and NUMA facts
// against the busybox view.
func checkTopo(t *testing.T, topo *Topology, dump View, out []byte) {
	v, switches, err := ParseTopoJSON(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, tail(out, 2000))
	}
	for _, d := range DiffFuncs(topo.Want(), v.Funcs) {
		t.Errorf("topo tree: %s", d)
	}
	if want := topo.WantSwitches(); !slices.EqualFunc(want, switches, func(a, b Switch) bool {
		return a.Upstream == b.Upstream && slices.Equal(a.Downstream, b.Downstream)
	}) {
		t.Errorf("topo switches %+v, want %+v", switches, want)
	}
	for _, f := range dump.Funcs {
		if got, want := v.Facts[f.Addr], dump.Facts[f.Addr]; got != want {
			t.Errorf("%s: topo facts %+v, kernel (busybox) %+v", f.Addr, got, want)
		}
	}
}

// withVFs extends the oracle to the guest's VFs (Oracle.WithVFs), after checking
// that no PF or VF has the ACS capability that would make the substitution wrong.
func withVFs(t *testing.T, o Oracle, v View) Oracle {
	vfs := map[pcie.Address]pcie.Address{}
	for _, f := range v.Funcs {
		if f.PhysFn == "" {
			continue
		}
		pf, err := pcie.ParseAddress(f.PhysFn)
		if err != nil {
			t.Fatal(err)
		}
		if v.Facts[f.Addr].ACS != "" || v.Facts[pf].ACS != "" {
			t.Fatalf("VF %s or its PF %s has ACS: the oracle cannot be extended to it", f.Addr, pf)
		}
		vfs[f.Addr] = pf
	}
	return o.WithVFs(vfs)
}

// checkPairs compares every ordered pair of `p2pcheck pairs --all --format json` with
// the kernel's own verdict. The pairs contract covers distinct functions only, so the
// oracle's self pairs are compared only where p2pcheck prints them too. Pairs within
// one SR-IOV family, which the oracle cannot judge, are counted and logged.
func checkPairs(t *testing.T, o Oracle, v View, out []byte) {
	var doc struct {
		Pairs []struct {
			Provider string `json:"provider"`
			Client   string `json:"client"`
			MapType  string `json:"map_type"`
			Distance int    `json:"distance"`
		} `json:"pairs"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("pairs JSON: %v\n%s", err, tail(out, 2000))
	}
	got := map[[2]pcie.Address]Verdict{}
	for _, raw := range doc.Pairs {
		prov, err1 := canonicalAddress(raw.Provider)
		client, err2 := canonicalAddress(raw.Client)
		if err := errors.Join(err1, err2); err != nil {
			t.Errorf("pairs JSON: %v", err)
			continue
		}
		p := Verdict{Provider: prov, Client: client, MapType: raw.MapType, Distance: raw.Distance}
		key := [2]pcie.Address{p.Provider, p.Client}
		if _, dup := got[key]; dup {
			t.Errorf("p2pcheck prints the pair %s %s twice", p.Provider, p.Client)
		}
		got[key] = p
	}
	equal := 0
	for _, want := range o.Verdicts {
		key := [2]pcie.Address{want.Provider, want.Client}
		g, ok := got[key]
		delete(got, key)
		switch {
		case !ok && want.Provider == want.Client:
			continue
		case !ok:
			t.Errorf("p2pcheck has no pair %s %s; kernel: %s", want.Provider, want.Client, want)
		case g != want:
			t.Errorf("p2pcheck %s, kernel %s", g, want)
		default:
			equal++
		}
	}
	pfOf := func(a pcie.Address) string {
		for _, f := range v.Funcs {
			if f.Addr == a && f.PhysFn != "" {
				return f.PhysFn
			}
		}
		return a.String()
	}
	unjudged := 0
	for _, g := range got {
		if pfOf(g.Provider) == pfOf(g.Client) {
			unjudged++
			continue
		}
		t.Errorf("p2pcheck pair %s that the kernel did not judge", g)
	}
	if equal == 0 {
		t.Error("no pair of p2pcheck's equals the kernel's")
	}
	t.Logf("%d ordered pairs equal the kernel's; %d SR-IOV family pairs not judged by the oracle", equal, unjudged)
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
