package nccl

import "strconv"

// unknowns are the facts the prediction of pred takes as false for want of
// reading them, each with the topology were it true:
//   - NVLink between the GPUs, when NVML was not asked: all GPUs joined through
//     NVSwitches with their generation's links (an HGX board's wiring);
//   - a network device's GPUDirect RDMA support, when nvidia-peermem's and
//     DMA-BUF's state could not be read;
//   - a GPU's compute capability, when its PCI device ID is not known: taken as
//     8.0 (Ampere), the one that turns P2P reads on over NVLink and lets sends use
//     GPUDirect RDMA.
func (m *Machine) unknowns(pred *Node, nets []Net) []Unknown {
	var out []Unknown
	var gpus, unknownSM []*Node
	pred.Walk(func(n *Node) {
		if n.Name == "gpu" {
			gpus = append(gpus, n)
			if v, _ := n.Get("sm"); v == "0" {
				unknownSM = append(unknownSM, n)
			}
		}
	})
	if m.GPU == nil && len(gpus) > 1 {
		alt := withGPUs(pred, func(g *Node) {
			sm := atoi(attr(g, "sm"))
			g.Add("nvlink", Attr{"target", "ffffffff:ff:ff.0"}, Attr{"count", strconv.Itoa(fullNVLinks(sm))}, Attr{"tclass", "0x068000"})
		})
		out = append(out, Unknown{Fact: "NVLink between the GPUs", Why: "NVML not asked", Topology: alt})
	}
	for _, n := range nets {
		if n.GDR != "unknown" {
			continue
		}
		alt := cloneNode(pred)
		alt.Walk(func(x *Node) {
			if x.Name == "net" && attr(x, "name") == n.Name {
				x.SetInt("gdr", 1)
			}
		})
		out = append(out, Unknown{Fact: n.Name + " supports GPUDirect RDMA", Why: n.Why, Topology: alt})
	}
	if len(unknownSM) > 0 {
		alt := withGPUs(pred, func(g *Node) {
			if attr(g, "sm") == "0" {
				g.SetInt("sm", 80)
			}
		})
		out = append(out, Unknown{Fact: "compute capability 8.0", Why: "the GPU's PCI device ID is not one p2pcheck knows; NCCL asks CUDA", Topology: alt})
	}
	return out
}

func attr(n *Node, key string) string {
	v, _ := n.Get(key)
	return v
}

// withGPUs returns a copy of root with f applied to every <gpu>.
func withGPUs(root *Node, f func(*Node)) *Node {
	alt := cloneNode(root)
	var gs []*Node
	alt.Walk(func(n *Node) {
		if n.Name == "gpu" {
			gs = append(gs, n)
		}
	})
	for _, g := range gs {
		f(g)
	}
	return alt
}

// fullNVLinks is the number of NVLinks a data-centre GPU of a compute capability
// has: 18 on Hopper and Blackwell, 12 on Ampere, 6 on Volta, 4 on Pascal.
func fullNVLinks(sm int) int {
	switch {
	case sm >= 90:
		return 18
	case sm >= 80 || sm == 0:
		return 12
	case sm >= 70:
		return 6
	}
	return 4
}
