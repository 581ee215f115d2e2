package nccl

import (
	"cmp"
	"slices"
)

// FileInput prepares the prediction for a topology NCCL wrote (NCCL_TOPO_DUMP_FILE)
// or reads (NCCL_TOPO_FILE) as the machine: its GPUs, NVLinks, PCI tree and
// network devices, with their GPUDirect RDMA support as NCCL recorded it (the gdr
// attribute ncclTopoPopulateNics sets). What the file does not hold is said:
// plugin is the network plugin as NCCL names it ("IB", "Socket", "Libfabric" for
// an external one; its "Using network" line), empty when unknown; NVML's P2P
// status is not in the file and is taken as OK.
func FileInput(root *Node, plugin string, s Settings, v Version, versionSource string) Input {
	in := Input{Topology: cloneNode(root), Settings: s, Version: v, VersionSource: versionSource,
		Facts: Facts{NetPlugin: plugin}, Nets: []Net{}}
	if plugin == "" {
		in.Notes = append(in.Notes, "the network plugin is unknown (--net-plugin names it as NCCL's \"Using network\" line does): network labels are shown as NET")
	}
	var unknownGDR []string
	walkNets(in.Topology, "", func(x *Node, busID string) {
		n := Net{Dev: atoi(attr(x, "dev")), Name: attr(x, "name"), Plugin: plugin, BusID: busID}
		switch g, ok := x.Get("gdr"); {
		case !ok:
			n.GDR, n.Why = "unknown", "the topology records no gdr attribute for it"
			unknownGDR = append(unknownGDR, n.Name)
		case atoi(g) != 0:
			n.GDR, n.Why = "yes", "NCCL recorded gdr=1: its plugin reports GPU memory support (NCCL_PTR_CUDA, or NCCL_PTR_DMABUF with DMA-BUF usable; ncclTopoPopulateNics)"
		default:
			n.GDR, n.Why = "no", "NCCL recorded gdr=0: its plugin reports host memory only (no NCCL_PTR_CUDA and no usable NCCL_PTR_DMABUF; ncclTopoPopulateNics)"
		}
		in.Nets = append(in.Nets, n)
	})
	slices.SortStableFunc(in.Nets, func(a, b Net) int { return cmp.Compare(a.Dev, b.Dev) })
	for _, name := range unknownGDR {
		alt := cloneNode(in.Topology)
		alt.Walk(func(x *Node) {
			if x.Name == "net" && attr(x, "name") == name {
				x.SetInt("gdr", 1)
			}
		})
		in.Unknowns = append(in.Unknowns, Unknown{Fact: name + " supports GPUDirect RDMA", Why: "the topology records no gdr attribute", Topology: alt})
	}
	in.Topology.Walk(func(x *Node) {
		if x.Name == "gpu" {
			if _, ok := x.Get("sm"); !ok {
				x.SetInt("sm", 0)
				in.Notes = append(in.Notes, "compute capability unknown for GPU dev "+attr(x, "dev")+": the topology records no sm")
			}
		}
	})
	return in
}

// walkNets calls f for each <net> with a dev attribute (the network devices NCCL
// adds, ncclTopoAddNet) with the bus ID of the <pci> holding its <nic>, empty for a
// <nic> below a <cpu>.
func walkNets(n *Node, busID string, f func(x *Node, busID string)) {
	if n.Name == "pci" {
		busID = attr(n, "busid")
	}
	if n.Name == "cpu" {
		busID = ""
	}
	for _, s := range n.Subs {
		if s.Name == "net" {
			if _, ok := s.Get("dev"); ok {
				f(s, busID)
			}
			continue
		}
		walkNets(s, busID, f)
	}
}
