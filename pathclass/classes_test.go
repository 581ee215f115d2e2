package pathclass

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/pcie"
)

// randomTree builds a random topology through pcie.NewTopology: host bridges on two
// NUMA nodes (or none known), bridges below bridges with Broadcom PEX Gen4 and Gen5
// IDs of both levels among others, Intel VMD domains (addresses NCCL does not take
// for functions), VFs, and now and then a chain deep enough that ncclChain stops
// before its end.
func randomTree(r *rand.Rand, round int) *pcie.Topology {
	ids := [][4]uint16{
		{0x8086, 0x352a, 0, 0},
		{0x10b5, 0x9797, 0, 0},
		{0x1000, 0xc030, 0x1000, 0x0100}, // Gen5, level 0
		{0x1000, 0xc030, 0x1000, 0x1100}, // Gen5, level 1
		{0x1000, 0xc010, 0x1000, 0xa064}, // Gen4, both levels
		{0x10de, 0x2330, 0x10de, 0x16c1},
	}
	numas := []int{-1, 0, 1}
	var recs []pcie.Record
	type node struct {
		path string
		dom  uint32
	}
	var bridges []node
	seq := 0
	add := func(parent node, vmd bool) node {
		seq++
		dom := parent.dom
		path := parent.path
		if vmd {
			dom = 0x10000
			path += fmt.Sprintf("/pci%04x:00", dom)
		}
		a := pcie.Address{Domain: dom, Bus: uint8(seq >> 8), Device: uint8(seq>>3) & 0x1f, Function: uint8(seq & 7)}
		id := ids[r.IntN(len(ids))]
		numa := numas[r.IntN(len(numas))]
		rec := pcie.Record{Address: a, Path: path + "/" + a.String(), Vendor: id[0], Device: id[1],
			SubVendor: id[2], SubDevice: id[3], Class: 0x060400}
		if r.IntN(4) > 0 {
			rec.NUMANode = &numa
		}
		recs = append(recs, rec)
		return node{path: rec.Path, dom: dom}
	}
	for h := range 1 + r.IntN(3) {
		bridges = append(bridges, node{path: fmt.Sprintf("pci0000:%02x", h)})
	}
	n := 2 + r.IntN(80)
	deep := round%40 == 0
	if deep {
		n = 1100 // about 1,050 levels: deeper than the 256 steps of two ncclChain takes
	}
	for i := range n {
		parent := bridges[r.IntN(len(bridges))]
		if deep {
			parent = bridges[len(bridges)-1]
		}
		nd := add(parent, !deep && i > 3 && r.IntN(40) == 0)
		bridges = append(bridges, nd)
	}
	// VFs of some of the functions, beside them as sysfs places them.
	for range min(len(recs), 5) {
		if r.IntN(2) == 0 {
			continue
		}
		pf := recs[r.IntN(len(recs))]
		seq++
		a := pcie.Address{Domain: pf.Address.Domain, Bus: uint8(seq >> 8), Device: uint8(seq>>3) & 0x1f, Function: uint8(seq & 7)}
		dir := pf.Path[:len(pf.Path)-len(pf.Address.String())]
		recs = append(recs, pcie.Record{Address: a, Path: dir + a.String(), Vendor: 0x15b3, Device: 0x101e, PhysFn: &pf.Address, Class: 0x020000})
	}
	return pcie.NewTopology(recs)
}

// TestClassesRandom: Classes gives NVSMI's and NCCL's answer, note included, for
// every ordered pair of functions of random trees.
func TestClassesRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 200 {
		top := randomTree(r, round)
		c := NewClasses(top.Devices)
		devs := top.Devices
		pairs := 0
		for _, a := range devs {
			for _, b := range devs {
				if len(devs) > 100 && r.IntN(2000) > 0 {
					continue // a sample of the deep trees' pairs
				}
				pairs++
				if got, want := c.NVSMI(a, b, 0), NVSMI(a, b, 0); got != want {
					t.Fatalf("round %d: NVSMI(%s, %s) = %+v, want %+v", round, a.Address, b.Address, got, want)
				}
				if got, want := c.NCCL(a, b), NCCL(a, b); got != want {
					t.Fatalf("round %d: NCCL(%s, %s) = %+v, want %+v", round, a.Address, b.Address, got, want)
				}
			}
		}
		if pairs == 0 {
			t.Fatalf("round %d: no pairs compared", round)
		}
	}
}

// TestClassesNoAlloc: a pair's class costs no allocation, however deep the tree (the
// functions allocate both chains).
func TestClassesNoAlloc(t *testing.T) {
	var recs []pcie.Record
	path := "pci0000:00"
	for i := range 250 {
		a := pcie.Address{Bus: uint8(i), Device: 0}
		path += "/" + a.String()
		recs = append(recs, pcie.Record{Address: a, Path: path, Class: 0x060400, Vendor: 0x1000, Device: 0xc030, SubVendor: 0x1000, SubDevice: 0x1100})
		g := pcie.Address{Bus: uint8(i), Device: 1}
		recs = append(recs, pcie.Record{Address: g, Path: path + "/" + g.String(), Class: 0x030200, Vendor: 0x10de, Device: 0x2330})
	}
	top := pcie.NewTopology(recs)
	c := NewClasses(top.Devices)
	a, b := top.Device(pcie.Address{Bus: 249, Device: 1}), top.Device(pcie.Address{Bus: 3, Device: 1})
	if got, want := c.NCCL(a, b), NCCL(a, b); got != want {
		t.Fatalf("NCCL = %v, want %v", got, want)
	}
	if allocs := testing.AllocsPerRun(20, func() { c.NVSMI(a, b, 0); c.NCCL(a, b) }); allocs != 0 {
		t.Errorf("%v allocations per pair, want 0", allocs)
	}
}

// TestPairCountsRandom: PairCounts equals classing every pair with NVSMI, on random
// trees and random subsets of their functions (functions without a host bridge
// among them).
func TestPairCountsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for round := range 200 {
		top := randomTree(r, round)
		c := NewClasses(top.Devices)
		var devs []*pcie.Device
		keep := max(2, len(top.Devices)/40) // of 40 functions in the large trees
		for _, d := range top.Devices {
			if r.IntN(len(top.Devices)) < keep || len(top.Devices) < 100 && r.IntN(3) > 0 {
				devs = append(devs, d)
			}
		}
		if round%7 == 0 {
			devs = append(devs, &pcie.Device{Record: pcie.Record{Address: pcie.Address{Bus: 0xff}}}) // no host bridge
		}
		want := map[Class]int{}
		for i, a := range devs {
			for _, b := range devs[i+1:] {
				want[NVSMI(a, b, 0).Class]++
			}
		}
		if diff := cmp.Diff(want, c.PairCounts(devs)); diff != "" {
			t.Fatalf("round %d (%d functions): PairCounts (-NVSMI +got):\n%s", round, len(devs), diff)
		}
	}
}
