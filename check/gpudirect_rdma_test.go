package check_test

import (
	"slices"
	"testing"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/kversion"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/procfs"
)

func TestGPUDirectRDMARules(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(*node.Platform)
		want   verdict
	}{
		// DMA-BUF needs the NIC's rdma-core support, which cannot be read: never a pass.
		{"dmabuf only", func(*node.Platform) {}, verdict{check.Unknown, gdr, "possible but unconfirmed", "NCCL_DEBUG=INFO"}},
		{"proprietary, no peermem", func(p *node.Platform) { p.NVIDIA = &procfs.NVIDIADriver{Version: "535.1", Major: 535} },
			verdict{check.Fail, gdr, "proprietary NVIDIA modules do not export DMA-BUF", "NCCL 2.13+ then uses DMA-BUF by default (NCCL_DMABUF_ENABLE defaults to 1)"}},
		{"old kernel, peermem", func(p *node.Platform) {
			p.Kernel = &kversion.Version{Release: "5.4.0", Major: 5, Minor: 4}
			p.MemoryPeers = map[string]string{"nv_mem": "1.0"}
		}, verdict{check.Pass, nil, "through peermem", ""}},
		{"both peer clients", func(p *node.Platform) {
			p.Modules = append(slices.Clone(p.Modules), procfs.Module{Name: "nvidia_peermem"}, procfs.Module{Name: "nv_peer_mem"})
		}, verdict{check.Warn, nil, "both nvidia_peermem and nv_peer_mem", "rmmod nv_peer_mem"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := loadMachine(t, "amd-epyc")
			tt.change(&n.Platform)
			judge(t, tt.want, run1(t, check.NewFacts(n, check.Inputs{}), "gpudirect_rdma"))
		})
	}
	t.Run("pre-Turing GPU", func(t *testing.T) {
		n := loadMachine(t, "amd-epyc")
		devs := slices.Clone(n.Topology.Devices)
		for i, d := range devs {
			if d.IsGPU() {
				c := *d
				c.Device = 0x1db1 // GV100 (Volta)
				devs[i] = &c
			}
		}
		n.Topology = &pcie.Topology{Devices: devs}
		r := run1(t, check.NewFacts(n, check.Inputs{}), "gpudirect_rdma")
		judge(t, verdict{check.Fail, gdr, "older than Turing", "open NVIDIA kernel modules"}, r)
	})
}
