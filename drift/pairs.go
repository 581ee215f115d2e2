package drift

import (
	"fmt"

	"github.com/p2pkit/p2pkit/nccl"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pathclass"
	"github.com/p2pkit/p2pkit/pcie"
)

// maxNCCLGPUs bounds the GPUs and network devices whose NCCL transports are
// predicted: the prediction's path search grows with the fourth power of the
// nodes (16 GPUs take 0.2 s on the 2-core development machine, 32 take 3.6 s,
// 64 two minutes), and an HGX node has 8. A variable for FuzzSummarize, whose
// instrumented runs would spend their time in NCCL's search.
var maxNCCLGPUs = 16

// summarizePairs evaluates every ordered pair of devices of interest: the
// kernel's verdict (p2pdma, as calc_map_type_and_dist() in drivers/pci/p2pdma.c),
// the path classes (pathclass) and NCCL's transport (nccl.Predict).
func (s *Summary) summarizePairs(n *node.Node, devs []*pcie.Device) {
	k := len(s.Interest)
	if k > maxPairDevices {
		s.PairsNote = fmt.Sprintf("%d devices of interest: p2pcheck compares the pairs of at most %d", k, maxPairDevices)
		return
	}
	ends := make([]*pcie.Device, k)
	for i, di := range s.Interest {
		ends[i] = devs[di]
	}
	at := map[pcie.Address]int{}
	for i, d := range ends {
		at[d.Address] = i
	}
	s.pairs = make([]pairFacts, k*k)
	calc := p2pdma.NewCalculator(n.Topology, n.P2P())
	for e, v := range calc.AllEnds(ends) {
		v = calc.CheckComplete(v, e.Provider, e.Client)
		nv := 0
		if n.GPU != nil && e.Provider.IsGPU() && e.Client.IsGPU() {
			nv = n.NVLinks(e.Provider, e.Client)
		}
		vs := pathclass.NVSMI(e.Provider, e.Client, nv)
		p := &s.pairs[at[e.Provider.Address]*k+at[e.Client.Address]]
		*p = pairFacts{mapType: v.MapType, distance: int32(v.Distance), nvsmi: vs.Class,
			nvlinks: uint16(min(vs.NVLinks, 1<<16-1)), nccl: pathclass.NCCL(e.Provider, e.Client).Class}
	}
	s.predictNCCL(n, at)
}

// predictNCCL records NCCL's transport for each GPU pair and its GPUDirect RDMA
// decision for each GPU and NIC, under NCCL's defaults (no NCCL_* setting, the
// release nccl.DefaultVersion): what the fabric gives a job, not what one job's
// environment asks for.
func (s *Summary) predictNCCL(n *node.Node, at map[pcie.Address]int) {
	gpus, nics := 0, 0
	for _, i := range s.Interest {
		switch s.Devices[i].Role {
		case RoleGPU:
			gpus++
		case RoleNIC, RoleRDMANIC:
			nics++
		}
	}
	switch {
	case gpus == 0:
		s.NCCL = true // nothing for NCCL to do: no transport to compare
		return
	case gpus > maxNCCLGPUs || nics > maxNCCLGPUs:
		s.PairsNote = fmt.Sprintf("NCCL's transports are predicted for at most %d GPUs and %d NICs", maxNCCLGPUs, maxNCCLGPUs)
		return
	}
	in, _ := nccl.FromNode(n, nil).Input(nccl.Settings{}, nccl.DefaultVersion, "default")
	r, err := nccl.Predict(in)
	if err != nil {
		s.PairsNote = "NCCL's transports were not predicted: " + err.Error()
		return
	}
	k := len(s.Interest)
	interned := map[string]uint32{}
	set := func(a, b string, text string) {
		i, okA := lookup(at, a)
		j, okB := lookup(at, b)
		if !okA || !okB {
			return
		}
		id, ok := interned[text]
		if !ok {
			s.transports = append(s.transports, text)
			id = uint32(len(s.transports))
			interned[text] = id
		}
		s.pairs[i*k+j].transport = id
	}
	bus := func(rank int) string {
		if rank >= 0 && rank < len(r.GPUs) {
			return r.GPUs[rank].BusID
		}
		return ""
	}
	for _, p := range r.GPUPairs {
		set(bus(p.From), bus(p.To), p.Transport+" via "+p.Via)
	}
	for _, g := range r.GPUNets {
		if g.Net < 0 || g.Net >= len(r.Nets) || r.Nets[g.Net].BusID == "" {
			continue
		}
		text := "GPUDirect RDMA recv " + g.Recv + ", send " + g.Send
		set(bus(g.GPU), r.Nets[g.Net].BusID, text)
		set(r.Nets[g.Net].BusID, bus(g.GPU), text)
	}
	s.NCCL = true
}

func lookup(at map[pcie.Address]int, bdf string) (int, bool) {
	a, err := pcie.ParseAddress(bdf)
	if err != nil {
		return 0, false
	}
	i, ok := at[a]
	return i, ok
}

// pair returns the verdicts of the ordered pair of devices of interest i, j
// (indices in Interest), or false when the pairs were not evaluated.
func (s *Summary) pair(i, j int) (pairFacts, bool) {
	k := len(s.Interest)
	if s.pairs == nil || i < 0 || j < 0 || i >= k || j >= k {
		return pairFacts{}, false
	}
	return s.pairs[i*k+j], true
}

// kernelText is the kernel's verdict as `p2pcheck pairs` prints it.
func (p pairFacts) kernelText() string {
	if p.mapType == p2pdma.Unknown {
		return "unknown"
	}
	return fmt.Sprintf("%s, distance %d", p.mapType, p.distance)
}

// classText is the two path classes, nvidia-smi's and NCCL's.
func (p pairFacts) classText() string {
	return pathclass.Result{Class: p.nvsmi, NVLinks: int(p.nvlinks)}.String() + " (nvidia-smi), " + p.nccl.String() + " (NCCL)"
}

// transportText is NCCL's transport, or "none" for a pair NCCL does not connect.
func (s *Summary) transportText(p pairFacts) string {
	if p.transport == 0 {
		return "none"
	}
	return s.transports[p.transport-1]
}
