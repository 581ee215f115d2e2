package check

import (
	"fmt"
	"slices"
	"strings"

	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
)

// checkGPUDirectRDMA reports which GPUDirect RDMA path the node offers to its
// RDMA NICs, the way NCCL decides it (src/transport/net_ib): the peer-memory
// path needs nvidia_peermem loaded or a client registered in
// /sys/kernel/mm/memory_peers (MOFED/DOCA ib_core); the DMA-BUF path, which NCCL
// uses since 2.13 by default (NCCL_DMABUF_ENABLE=1, src/init.cc
// dmaBufSupported), needs a Turing or newer GPU on the open kernel modules,
// Linux 5.12+ with CONFIG_DMA_SHARED_BUFFER, and a NIC whose kernel driver and
// rdma-core register DMA-BUF memory (ibv_reg_dmabuf_mr, rdma-core 34+), which
// NCCL probes per HCA at run time and p2pcheck cannot read: with only that path,
// the result is unknown, never a pass. nv_peer_mem loaded next to nvidia_peermem
// warns, as only one can work.
func checkGPUDirectRDMA(f *Facts) Result {
	r := Result{Refs: []string{docRef("gpudirect_rdma"), urlGPUDirectRDMA, "NVIDIA/nccl src/transport/net_ib", urlNCCLEnv}}
	p := f.Node.Platform
	var rdma []string
	for _, n := range f.NICs() {
		rdma = append(rdma, n.RDMADevs...)
	}
	if len(f.NVIDIAGPUs()) == 0 || len(rdma) == 0 {
		r.Status, r.Summary = Skip, "needs an NVIDIA GPU and an RDMA NIC (/sys/class/infiniband)"
		return r
	}
	peermem := p.Modules.Loaded("nvidia_peermem")
	legacy := p.Modules.Loaded("nv_peer_mem")
	var peers []string
	for name := range p.MemoryPeers {
		if strings.HasPrefix(name, "nv_mem") {
			peers = append(peers, name)
		}
	}
	slices.Sort(peers)
	if len(peers) > 0 {
		r.Evidence = append(r.Evidence, Evidence{Source: "/sys/kernel/mm/memory_peers", Value: strings.Join(peers, " ")})
	}
	r.Evidence = append(r.Evidence, Evidence{Source: "/proc/modules", Value: fmt.Sprintf("nvidia_peermem=%t nv_peer_mem=%t", peermem, legacy)})
	d := f.dmabuf()
	r.Findings = append(r.Findings, d.findings...)
	var paths []string
	if f.peermem() {
		paths = append(paths, "peermem")
	}
	switch d.state {
	case Pass:
		paths = append([]string{"dmabuf"}, paths...)
	case Unknown:
		paths = append(paths, "dmabuf (unknown)")
	}
	r.Observed = "paths: " + strings.Join(paths, ", ")
	if len(paths) == 0 {
		r.Observed = "paths: none"
	}
	r.Subjects = rdma
	r.Expected = "dmabuf or peermem"
	dmabufFix := "use the open NVIDIA kernel modules (Turing or newer GPU) on Linux 5.12+ with an rdma-core that has ibv_reg_dmabuf_mr (34+): NCCL 2.13+ then uses DMA-BUF by default (NCCL_DMABUF_ENABLE defaults to 1)"
	peermemFix := "or: modprobe nvidia-peermem (it needs the peer-memory API of MLNX_OFED/DOCA's ib_core)"
	switch {
	case peermem && legacy:
		r.Status = Warn
		r.Summary = "both nvidia_peermem and nv_peer_mem are loaded: only one can register; unload nv_peer_mem"
		r.Remediation = []string{"systemctl disable --now nv_peer_mem && rmmod nv_peer_mem"}
	case f.peermem():
		r.Status = Pass
		r.Summary = "GPUDirect RDMA available through peermem"
		if d.state == Pass {
			r.Summary = "GPUDirect RDMA available through dmabuf and peermem"
		}
		r.Subjects = nil
	case d.state == Unknown:
		r.Status = Unknown
		r.Blocks = []Capability{CapGDR}
		r.Summary = "no nvidia-peermem; DMA-BUF GPUDirect RDMA is possible but unconfirmed: " + d.why
		r.Remediation = []string{"confirm with NCCL_DEBUG=INFO (\"DMA-BUF is available\" and GPU Direct RDMA lines) or rdma-core's ibv_reg_dmabuf_mr; " + strings.TrimPrefix(peermemFix, "or: ")}
	default:
		r.Status = Fail
		r.Blocks = []Capability{CapGDR}
		r.Summary = "no GPUDirect RDMA path: no nvidia-peermem and no DMA-BUF (" + d.why + ")"
		r.Remediation = []string{dmabufFix, peermemFix}
	}
	return r
}

// dmabufVerdict is whether DMA-BUF GPUDirect RDMA is possible: Pass, Fail or
// Unknown, why not (or what is unknown), and one finding per prerequisite.
type dmabufVerdict struct {
	state    Status
	why      string
	findings []Finding
}

// dmabuf judges the DMA-BUF GPUDirect RDMA prerequisites (see
// checkGPUDirectRDMA); a prerequisite that fails makes it Fail, one that cannot
// be read Unknown.
func (f *Facts) dmabuf() dmabufVerdict {
	p := f.Node.Platform
	v := dmabufVerdict{state: Pass}
	var no, unknown []string
	add := func(subject string, s Status, msg string) {
		v.findings = append(v.findings, Finding{Subject: subject, Status: s, Message: msg})
		switch s {
		case Fail:
			no = append(no, msg)
		case Unknown:
			unknown = append(unknown, msg)
		}
	}
	if ok, why := dmabufReady(p); ok {
		add("kernel and driver", Pass, "Linux "+p.Kernel.Release+" with the open NVIDIA kernel modules")
	} else if p.Kernel == nil {
		add("kernel and driver", Unknown, why)
	} else {
		add("kernel and driver", Fail, why)
	}
	// One reading of the configuration (procfs.KernelConfig.Value): an option a
	// found configuration leaves out is not set, as Kconfig leaves it out
	// (procfs.KernelConfig.Value, through node).
	switch p.KernelConfig.Value("CONFIG_DMA_SHARED_BUFFER") {
	case node.ConfigUnknown:
		add("CONFIG_DMA_SHARED_BUFFER", Unknown, "whether the kernel has CONFIG_DMA_SHARED_BUFFER is unknown")
	case node.ConfigNo:
		add("CONFIG_DMA_SHARED_BUFFER", Fail, "the kernel is built without CONFIG_DMA_SHARED_BUFFER")
	}
	for _, g := range f.NVIDIAGPUs() {
		if !turingOrNewer(g) {
			add(g.Address.String(), Fail, fmt.Sprintf("GPU %s (device %04x) is older than Turing: the open kernel modules do not drive it", g.Address, g.Device))
		}
	}
	nics := 0
	for _, n := range f.NICs() {
		for _, dev := range n.RDMADevs {
			nics++
			v.findings = append(v.findings, Finding{Subject: dev, Status: Unknown,
				Message: "whether its driver and rdma-core register DMA-BUF memory (ibv_reg_dmabuf_mr) cannot be read; NCCL probes it per HCA"})
		}
	}
	if nics > 0 {
		unknown = append(unknown, "whether the RDMA NICs' drivers and rdma-core register DMA-BUF memory cannot be read")
	}
	switch {
	case len(no) > 0:
		v.state, v.why = Fail, strings.Join(no, "; ")
	case len(unknown) > 0:
		v.state, v.why = Unknown, strings.Join(unknown, "; ")
	}
	return v
}

// turingOrNewer reports an NVIDIA GPU of the Turing generation or newer, which
// the open kernel modules support (open-gpu-kernel-modules README): their PCI
// device IDs start at 0x1e00 (TU102); Volta and older sit below.
func turingOrNewer(d *pcie.Device) bool { return d.Device >= 0x1e00 }

// dmabufReady reports whether the kernel and NVIDIA driver allow DMA-BUF
// GPUDirect RDMA: Linux 5.12+ (dma-buf importers in RDMA, ib_umem_dmabuf) and the
// open NVIDIA kernel modules, the only ones that export GPU memory as DMA-BUF.
// It gives the reason when not.
func dmabufReady(p node.Platform) (bool, string) {
	switch {
	case p.Kernel == nil:
		return false, "kernel version unknown"
	case !p.Kernel.AtLeast(5, 12):
		return false, "kernel " + p.Kernel.Release + " is older than 5.12"
	case p.NVIDIA == nil:
		return false, "NVIDIA driver not loaded"
	case !p.NVIDIA.Open:
		return false, "proprietary NVIDIA modules do not export DMA-BUF"
	}
	return true, ""
}
