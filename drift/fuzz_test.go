package drift

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
)

// FuzzSummarize builds trees from arbitrary records (config space, sysfs paths
// that loop, skip bridges or repeat, IOMMU groups, NUMA nodes, VFs) and checks
// what a hostile tree must never break: Summarize returns, a machine compared
// with itself has no drift, and its signature does not depend on the read.
func FuzzSummarize(f *testing.F) {
	for _, name := range []string{"sriov-nic", "malformed", "vmd-gpu"} {
		f.Add(seedOf(f, name))
	}
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	defer func(n int) { maxNCCLGPUs = n }(maxNCCLGPUs)
	maxNCCLGPUs = 2 // NCCL's own search is not what this target explores
	f.Fuzz(func(t *testing.T, data []byte) {
		recs := fuzzRecords(data)
		n := &node.Node{Topology: pcie.NewTopology(recs)}
		s := Summarize(n)
		if r := Compare(s, s); len(r.Changes) != 0 {
			t.Fatalf("a tree against itself: %v", briefs(r))
		}
		if g := Summarize(&node.Node{Topology: pcie.NewTopology(fuzzRecords(data))}).Signature(); g != s.Signature() {
			t.Fatalf("signatures %s and %s of one tree", s.Signature(), g)
		}
	})
}

// seedOf encodes a fixture machine's records as fuzz input.
func seedOf(f testing.TB, name string) []byte {
	m := load(f, mustMachine(f, name))
	var out []byte
	for _, d := range m.Topology.Devices {
		out = append(out, fuzzRecord(d.Record)...)
	}
	return out
}

// A fuzz record: 1 byte path length, the path, 2 bytes config length, the
// config, 1 byte of flags (IOMMU group, NUMA node, PF).
func fuzzRecord(r pcie.Record) []byte {
	var b []byte
	p := r.Path
	if len(p) > 255 {
		p = p[:255]
	}
	b = append(b, byte(len(p)))
	b = append(b, p...)
	c := r.Config
	if len(c) > 512 {
		c = c[:512]
	}
	b = binary.LittleEndian.AppendUint16(b, uint16(len(c)))
	b = append(b, c...)
	var flags byte
	if r.IOMMUGroup != nil {
		flags = byte(*r.IOMMUGroup&0x0f) | 0x10
	}
	if r.PhysFn != nil {
		flags |= 0x80
	}
	return append(b, flags)
}

func fuzzRecords(data []byte) []pcie.Record {
	var recs []pcie.Record
	for i := 0; len(data) > 0 && i < 64; i++ {
		pl := int(data[0])
		data = data[1:]
		if pl > len(data) {
			pl = len(data)
		}
		path := string(data[:pl])
		data = data[pl:]
		var cfg []byte
		if len(data) >= 2 {
			cl := int(binary.LittleEndian.Uint16(data))
			data = data[2:]
			cl = min(cl, len(data))
			cfg, data = data[:cl], data[cl:]
		}
		r := pcie.Record{Path: path, Config: cfg}
		if a, err := pcie.ParseAddress(lastElement(path)); err == nil {
			r.Address = a
		} else {
			r.Address = pcie.Address{Bus: uint8(i), Device: uint8(i % 32)}
		}
		if len(cfg) >= 4 {
			r.Vendor, r.Device = binary.LittleEndian.Uint16(cfg), binary.LittleEndian.Uint16(cfg[2:])
		}
		if len(cfg) >= 12 {
			r.Class = uint32(cfg[11])<<16 | uint32(cfg[10])<<8 | uint32(cfg[9])
		}
		if len(data) > 0 {
			flags := data[0]
			data = data[1:]
			if flags&0x10 != 0 {
				g := int(flags & 0x0f)
				r.IOMMUGroup, r.NUMANode = &g, &g
			}
			if flags&0x80 != 0 && len(recs) > 0 {
				pf := recs[0].Address
				r.PhysFn = &pf
			}
		}
		recs = append(recs, r)
	}
	return recs
}

func lastElement(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}

func mustMachine(tb testing.TB, name string) *fixtureMachine {
	m, err := fixtureByName(name)
	if err != nil {
		tb.Fatal(fmt.Errorf("%s: %w", name, err))
	}
	return m
}

type fixtureMachine = fixture.Machine

var fixtureByName = fixture.ByName
