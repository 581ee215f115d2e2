package node_test

import (
	"testing"

	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
)

// TestNVLinks counts NVLinks as nvidia-smi's NV# does: the links that end at the
// other GPU, else, when both GPUs reach NVSwitches, the smaller of their counts
// into the fabric; 0 without NVML facts for either GPU.
func TestNVLinks(t *testing.T) {
	a, b, c := pcie.Address{Bus: 0x1a}, pcie.Address{Bus: 0x1b}, pcie.Address{Bus: 0x1c}
	sw := pcie.Address{Bus: 0x80}
	to := func(r pcie.Address, typ string) gpu.NVLinkPeer { return gpu.NVLinkPeer{Remote: &r, RemoteType: typ} }
	toSwitch := gpu.NVLinkPeer{RemoteType: "switch"} // far end outside the PCI tree, as in a VM
	links := func(peers ...gpu.NVLinkPeer) *gpu.NVLink {
		for i := range peers {
			peers[i].Link = i
		}
		return &gpu.NVLink{Active: len(peers), Links: peers}
	}
	n := func(gpus ...gpu.GPU) *node.Node { return &node.Node{GPU: &gpu.Facts{GPUs: gpus}} }
	at := func(addr pcie.Address, nv *gpu.NVLink) gpu.GPU { return gpu.GPU{Address: &addr, NVLink: nv} }
	tests := []struct {
		name string
		n    *node.Node
		want int
	}{
		{"no NVML facts", &node.Node{}, 0},
		{"other GPU not in NVML", n(at(a, links(to(b, "gpu")))), 0},
		{"address unknown to NVML", n(gpu.GPU{NVLink: links(to(b, "gpu"))}, at(b, links(to(a, "gpu")))), 0},
		{"NVLink not reported", n(at(a, nil), at(b, links(to(a, "gpu")))), 0},
		{"two direct links, one to a third GPU", n(at(a, links(to(b, "gpu"), to(b, "gpu"), to(c, "gpu"))), at(b, links(to(a, "gpu"), to(a, "gpu")))), 2},
		{"direct links win over the fabric", n(at(a, links(to(b, "gpu"), toSwitch, toSwitch)), at(b, links(to(a, "gpu"), toSwitch, toSwitch))), 1},
		{"both on NVSwitches: the smaller count", n(at(a, links(toSwitch, to(sw, "switch"), toSwitch)), at(b, links(toSwitch, toSwitch))), 2},
		{"only one side on NVSwitches", n(at(a, links(toSwitch, toSwitch)), at(b, links(to(c, "gpu")))), 0},
		{"links to other kinds of device", n(at(a, links(to(sw, "ibmnpu"), gpu.NVLinkPeer{RemoteType: "unknown"})), at(b, links(toSwitch))), 0},
		{"no links", n(at(a, links()), at(b, links())), 0},
	}
	da, db := &pcie.Device{Record: pcie.Record{Address: a}}, &pcie.Device{Record: pcie.Record{Address: b}}
	for _, tt := range tests {
		if got := tt.n.NVLinks(da, db); got != tt.want {
			t.Errorf("%s: NVLinks = %d, want %d", tt.name, got, tt.want)
		}
	}
}
