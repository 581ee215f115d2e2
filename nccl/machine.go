package nccl

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pathclass"
	"github.com/p2pkit/p2pkit/pcie"
)

// Machine is what NCCL would detect on a node, gathered by the caller: the PCIe
// tree, the CPU, NVML's GPU facts, the network interfaces and the modules that
// decide GPUDirect RDMA and GDRCopy. Unknown facts stay nil.
type Machine struct {
	Topology *pcie.Topology
	// Arch is the CPU architecture as NCCL names it: "x86_64", "arm64", "ppc64".
	Arch string
	// CPUVendor, CPUFamily and CPUModel are /proc/cpuinfo's vendor_id, cpu family
	// and model, the values NCCL takes from CPUID.
	CPUVendor           string
	CPUFamily, CPUModel int
	// GPU is NVML's view (NVLinks, P2P status); nil when NVML was not asked.
	GPU *gpu.Facts
	// Interfaces are the network interfaces with an address, in the order the
	// kernel lists them, for NCCL's Socket transport; nil when unknown.
	Interfaces []Interface
	// Peermem reports nvidia-peermem (or nv_peer_mem) loaded; nil when unknown.
	Peermem *bool
	// DMABuf reports whether GPU memory can be exported as DMA-BUF (open NVIDIA
	// kernel modules on Linux 5.12 or later); nil when unknown.
	DMABuf *bool
	// GDRDrv reports the gdrdrv module loaded with its device node; nil when unknown.
	GDRDrv *bool
	// RDMARates maps RDMA devices to their first port's rate in Mb/s
	// (/sys/class/infiniband/<dev>/ports/1/rate); nil or missing when unknown.
	RDMARates map[string]int
}

// ParseRate reads an InfiniBand port rate as sysfs shows it ("400 Gb/sec (4X NDR)",
// rate_show in drivers/infiniband/core/sysfs.c) in Mb/s, the unit NCCL's IB
// transport gives speeds in (ncclIbSpeed times ncclIbWidth); 0 when unreadable.
func ParseRate(s string) int {
	f := strings.Fields(s)
	if len(f) < 2 || f[1] != "Gb/sec" {
		return 0
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil || v <= 0 || v > 1e6 {
		return 0
	}
	return int(v * 1000)
}

// Interface is a network interface as NCCL's Socket transport sees it.
type Interface struct {
	Name string `json:"name"`
	// PCI is the PCI function the interface's device link resolves to; nil when
	// it is not a PCI device (virtio, USB, virtual).
	PCI *pcie.Address `json:"pci,omitempty"`
	// Subsystem is the bus of the device link ("pci", "virtio", ...); empty for
	// an interface without device.
	Subsystem string `json:"subsystem,omitempty"`
	// Speed is /sys/class/net/<name>/speed in Mb/s; 0 when unreadable.
	Speed int `json:"speed,omitempty"`
}

// FromNode gathers a Machine from what p2pcheck read: the tree, /proc/cpuinfo,
// /proc/modules, the NVIDIA driver version and NVML's facts.
func FromNode(n *node.Node, ifaces []Interface) *Machine {
	m := &Machine{Topology: n.Topology, GPU: n.GPU, Interfaces: ifaces}
	p := n.Platform
	if p.CPU != nil {
		m.CPUVendor, m.CPUFamily, m.CPUModel = p.CPU.VendorID, p.CPU.Family, p.CPU.Model
		switch {
		case p.CPU.VendorID != "":
			// Only x86 kernels print vendor_id (show_cpuinfo in arch/x86).
			m.Arch = "x86_64"
		case p.CPU.VendorID == "" && len(p.CPU.Flags) > 0:
			// Only arm64's /proc/cpuinfo has a Features line and no vendor_id.
			m.Arch = "arm64"
		}
	}
	if p.Modules != nil {
		pm := p.PeermemLoaded()
		m.Peermem = &pm
		g := p.Modules.Loaded("gdrdrv") && p.GDRDrvNode != nil
		m.GDRDrv = &g
	}
	if p.NVIDIA != nil && p.Kernel != nil {
		d := p.NVIDIA.Open && p.Kernel.AtLeast(5, 12)
		m.DMABuf = &d
	}
	return m
}

// Net is a network device NCCL's transport will use, in its device order.
type Net struct {
	Dev    int    `json:"dev"`
	Name   string `json:"name"`
	Plugin string `json:"plugin"` // "IB" or "Socket"
	// BusID is the PCI function NCCL places it under; empty when NCCL attaches
	// it to the first CPU (not a PCI device).
	BusID string `json:"bus_id,omitempty"`
	// GDR is the NIC's GPUDirect RDMA support as NCCL records it (the gdr
	// attribute): "yes", "no" or "unknown".
	GDR string `json:"gdr"`
	// Why explains GDR.
	Why string `json:"why"`
	// Device is the PCI function, nil when not PCI.
	Device *pcie.Device `json:"-"`
	speed  int
}

// Nets returns the network devices NCCL will use under s: its IB transport's RDMA
// devices unless NCCL_IB_DISABLE=1 or none exist (src/transport/net_ib.cc), else
// the Socket transport's interfaces (ncclFindInterfaces in src/misc/socket.cc).
// ok is false when they cannot be known (no interface list and no RDMA device).
func (m *Machine) Nets(s Settings) (nets []Net, plugin string, ok bool) {
	netName, _ := s.Get("NCCL_NET")
	if s.Int("NCCL_IB_DISABLE", 0) != 1 && (netName.Value == "" || strings.EqualFold(netName.Value, "IB")) {
		for _, d := range m.Topology.Devices {
			for _, r := range d.RDMADevs {
				nets = append(nets, Net{Name: r, Plugin: "IB", BusID: d.Address.String(), Device: d, speed: m.RDMARates[r]})
			}
		}
		slices.SortStableFunc(nets, func(a, b Net) int { return cmp.Compare(a.Name, b.Name) })
		if len(nets) > 0 {
			for i := range nets {
				nets[i].Dev = i
				nets[i].GDR, nets[i].Why = m.ibGDR(s)
			}
			return nets, "IB", true
		}
	}
	if m.Interfaces == nil {
		return nil, "Socket", false
	}
	for _, ifc := range socketInterfaces(m.Interfaces, s) {
		n := Net{Dev: len(nets), Name: ifc.Name, Plugin: "Socket", speed: ifc.Speed, GDR: "no",
			Why: "NCCL's Socket transport moves data through host memory only (ptrSupport NCCL_PTR_HOST, src/transport/net_socket.cc)"}
		if ifc.PCI != nil && ifc.Subsystem == "pci" {
			n.Device = m.Topology.Device(*ifc.PCI)
		}
		if n.Device != nil {
			n.BusID = n.Device.Address.String()
		}
		nets = append(nets, n)
	}
	return nets, "Socket", true
}

// ibGDR is NCCL's NIC GPUDirect RDMA support for the IB transport
// (ncclIbGetPhysProperties in src/transport/net_ib.cc, ncclTopoPopulateNics in
// src/graph/topo.cc): nvidia-peermem loaded, or DMA-BUF usable and not disabled
// with NCCL_DMABUF_ENABLE=0.
func (m *Machine) ibGDR(s Settings) (string, string) {
	if m.Peermem != nil && *m.Peermem {
		return "yes", "nvidia-peermem is loaded (NCCL checks /sys/module/nvidia_peermem/version and /sys/kernel/mm/memory_peers/nv_mem*)"
	}
	dmabuf := s.Int("NCCL_DMABUF_ENABLE", 1) != 0
	switch {
	case m.DMABuf != nil && *m.DMABuf && dmabuf:
		return "yes", "DMA-BUF: open NVIDIA kernel modules on Linux 5.12 or later (NCCL_DMABUF_ENABLE is not 0)"
	case m.Peermem == nil || m.DMABuf == nil && dmabuf:
		return "unknown", "whether nvidia-peermem is loaded or DMA-BUF works could not be read"
	case !dmabuf:
		return "no", "nvidia-peermem is not loaded and NCCL_DMABUF_ENABLE=0 turns DMA-BUF off"
	}
	return "no", "nvidia-peermem is not loaded and DMA-BUF needs the open NVIDIA kernel modules on Linux 5.12 or later"
}

// socketInterfaces picks interfaces as ncclFindInterfaces does: NCCL_SOCKET_IFNAME
// when set (longer than one character), else names starting with "ib", else any
// but docker*, lo*, virbr*, else docker*, lo*, virbr* in turn. At most 16 (MAX_IFS).
func socketInterfaces(all []Interface, s Settings) []Interface {
	if v, ok := s.Get("NCCL_SOCKET_IFNAME"); ok && len(v.Value) > 1 {
		return matchIfaces(all, v.Value)
	}
	for _, spec := range []string{"ib", "^docker,lo,virbr", "docker", "lo", "virbr"} {
		if got := matchIfaces(all, spec); len(got) > 0 {
			return got
		}
	}
	return nil
}

// matchIfaces applies an interface list the way matchIfList (src/misc/utils.cc)
// does: comma-separated prefixes; a leading '^' excludes; a leading '=' asks for
// exact names.
func matchIfaces(all []Interface, spec string) []Interface {
	exclude := strings.HasPrefix(spec, "^")
	spec = strings.TrimPrefix(spec, "^")
	exact := strings.HasPrefix(spec, "=")
	spec = strings.TrimPrefix(spec, "=")
	pats := strings.Split(spec, ",")
	var out []Interface
	for _, ifc := range all {
		hit := slices.ContainsFunc(pats, func(p string) bool {
			if exact {
				return ifc.Name == p
			}
			return strings.HasPrefix(ifc.Name, p)
		})
		if hit != exclude && len(out) < 16 {
			out = append(out, ifc)
		}
	}
	return out
}

// ncclGPUs returns the NVIDIA GPUs NCCL would drive, in PCI address order, with
// their NVML index (the same order when NVML was not asked).
func (m *Machine) ncclGPUs() (gpus []*pcie.Device, dev []int) {
	for _, d := range m.Topology.GPUs() {
		if d.Vendor == pcie.VendorNVIDIA && !d.IsVF() {
			gpus = append(gpus, d)
		}
	}
	for i, d := range gpus {
		idx := i
		if m.GPU != nil {
			for _, g := range m.GPU.GPUs {
				if g.Address != nil && *g.Address == d.Address {
					idx = g.Index
				}
			}
		}
		dev = append(dev, idx)
	}
	return gpus, dev
}

// computeCapability is the SM version of data-centre GPUs known by PCI device ID
// (pci.ids names them GA100, GH100, GB100/GB102); 0 when not known, and NCCL then
// asks CUDA.
func computeCapability(d *pcie.Device) int {
	switch id := d.Device; {
	case id >= 0x20b0 && id <= 0x20bf, id >= 0x20f0 && id <= 0x20ff:
		return 80
	case id >= 0x2320 && id <= 0x233f:
		return 90
	case id >= 0x2900 && id <= 0x29ff:
		return 100
	}
	return 0
}

type xmlBuilder struct {
	root *Node
	cpus []*Node // in creation order
	pcis map[pcie.Address]*Node
	m    *Machine
}

// XML writes the machine as NCCL's topology XML, the way NCCL's detection
// (ncclTopoFillGpu, ncclTopoFillNet, ncclTopoGetXmlFromSys in src/graph/xml.cc,
// ncclTopoPopulateNics in src/graph/topo.cc) builds it: each GPU and network
// device's PCI function with its parents up to a <cpu> per NUMA node, children
// ordered by bus ID; GPUs with their NVLinks; network devices under a <nic>.
// Attributes NCCL takes from CUDA or the host hash are left out when unknown
// (host_hash, affinity; sm when the device ID is not known): NCCL fills them in
// when it loads the file through NCCL_TOPO_FILE. notes lists what was assumed.
func (m *Machine) XML(s Settings) (root *Node, nets []Net, notes []string) {
	b := &xmlBuilder{root: &Node{Name: "system", Attrs: []Attr{{"version", "1"}}}, pcis: map[pcie.Address]*Node{}, m: m}
	gpus, devs := m.ncclGPUs()
	for i, d := range gpus {
		pci := b.pciNode(d, "0x03")
		g := pci.Sub("gpu")
		if g == nil {
			g = pci.Add("gpu")
		}
		g.SetInt("dev", devs[i])
		if sm := computeCapability(d); sm != 0 {
			g.SetInt("sm", sm)
		}
		g.SetInt("rank", i)
		// cudaDevAttrGPUDirectRDMASupported (ncclGpuGdrSupport, src/plugin/net.cc):
		// set on data-centre GPUs (3D controllers).
		gdr := 0
		if d.ClassCode()>>8 == pcie.Class3D {
			gdr = 1
		}
		g.SetInt("gdr", gdr)
		b.nvlinks(g, d)
	}
	if len(gpus) > 0 && m.GPU == nil {
		notes = append(notes, "NVLink unknown: NVML was not asked (snapshot, --root or --no-nvml); GPU pairs are shown over PCIe")
	}
	for _, v := range []struct{ name, note string }{
		{"NCCL_IB_HCA", "NCCL_IB_HCA is set but not applied: every RDMA device is listed"},
		{"NCCL_TOPO_FILE", "NCCL_TOPO_FILE is set: NCCL starts from that file, the prediction from the detected topology"},
		{"NCCL_NET_PLUGIN", "NCCL_NET_PLUGIN is set: an external network plugin's devices and GPUDirect RDMA support are not modelled"},
	} {
		if _, set := s.Get(v.name); set {
			notes = append(notes, v.note)
		}
	}
	nets, plugin, ok := m.Nets(s)
	if plugin == "IB" && ok && slices.ContainsFunc(nets, func(n Net) bool { return n.speed == 0 }) {
		notes = append(notes, "InfiniBand link rates are not read: NCCL's 10 Gb/s default is used for network bandwidths (NCCL reads the port's rate), which only matters where NCCL weighs the network against P2P and SHM inside the node")
	}
	if !ok {
		notes = append(notes, "network devices unknown: no interface list (a snapshot or --root) and no RDMA device")
	}
	for _, n := range nets {
		var parent *Node
		if n.Device != nil {
			parent = b.pciNode(n.Device, "0x02")
		} else {
			if len(b.cpus) == 0 {
				b.cpu("-1")
			}
			parent = b.cpus[0]
		}
		nic := parent.Sub("nic")
		if nic == nil {
			nic = parent.Add("nic")
		}
		x := nic.Add("net", Attr{"name", n.Name})
		x.SetInt("dev", n.Dev)
		if n.Plugin == "Socket" {
			// ncclNetSocketGetProperties (src/transport/net_socket.cc).
			speed := n.speed
			if speed <= 0 {
				speed = 10000
			}
			x.SetInt("latency", 0)
			x.SetInt("speed", speed)
			x.SetInt("port", 0)
			x.Set("guid", "0x"+strconv.FormatUint(uint64(n.Dev), 16))
			x.SetInt("maxconn", 65536)
		} else if n.speed > 0 {
			x.SetInt("speed", n.speed)
		}
		switch n.GDR {
		case "yes":
			x.SetInt("gdr", 1)
		case "no":
			x.SetInt("gdr", 0)
		}
	}
	return b.root, nets, notes
}

func (b *xmlBuilder) cpu(numa string) *Node {
	for _, c := range b.cpus {
		if v, _ := c.Get("numaid"); v == numa {
			return c
		}
	}
	c := b.root.Add("cpu", Attr{"numaid", numa})
	if b.m.Arch != "" {
		c.Set("arch", b.m.Arch)
	}
	if b.m.Arch == "x86_64" {
		c.Set("vendor", b.m.CPUVendor)
		c.SetInt("familyid", b.m.CPUFamily)
		c.SetInt("modelid", b.m.CPUModel)
	}
	b.cpus = append(b.cpus, c)
	return c
}

// pciNode is ncclTopoGetPciNode followed by ncclTopoGetXmlFromSys: the function's
// node with its attributes, hung below its NCCL parent (creating the parents).
func (b *xmlBuilder) pciNode(d *pcie.Device, class string) *Node {
	if n := b.pcis[d.Address]; n != nil {
		return n
	}
	n := &Node{Name: "pci", Attrs: []Attr{{"busid", d.Address.String()}}}
	b.pcis[d.Address] = n
	if d.Class != 0 || class == "" {
		class = fmt.Sprintf("0x%06x", d.Class)
	}
	n.Set("class", class)
	n.Set("vendor", fmt.Sprintf("0x%04x", d.Vendor))
	n.Set("device", fmt.Sprintf("0x%04x", d.Device))
	n.Set("subsystem_vendor", fmt.Sprintf("0x%04x", d.SubVendor))
	n.Set("subsystem_device", fmt.Sprintf("0x%04x", d.SubDevice))
	speed, width := linkAttrs(d)
	n.Set("link_speed", speed)
	n.Set("link_width", width)
	var parent *Node
	if ps := pathclass.NCCLParents(d); len(ps) > 0 {
		parent = b.pciNode(ps[0], "")
	} else {
		numa := "-1"
		if d.NUMANode != nil {
			numa = strconv.Itoa(*d.NUMANode)
		}
		parent = b.cpu(numa)
	}
	insertByBusID(parent, n)
	return n
}

// linkAttrs are link_speed and link_width as ncclTopoGetXmlFromSys reads them: the
// slower of the function's max_link_speed and its sysfs parent's, the narrower of
// the two max_link_width (an unreadable width counts as 0).
func linkAttrs(d *pcie.Device) (speed, width string) {
	gts := func(l pcie.Link) (string, float64) {
		s := l.Speed.GTs()
		if s == "unknown" {
			return "", math.MaxFloat32
		}
		f, _ := strconv.ParseFloat(strings.Fields(s)[0], 64)
		return s + " PCIe", f
	}
	devStr, devF := gts(d.Link().Max)
	w := d.Link().Max.Width
	portStr, portF, portW := "", math.MaxFloat32, 0
	// The sysfs parent ("../") is the bridge above d, or above its PF for a VF.
	if up := d.Upstream(); up != nil {
		portStr, portF = gts(up.Link().Max)
		portW = up.Link().Max.Width
	}
	speed = devStr
	if portF < devF {
		speed = portStr
	}
	return speed, strconv.Itoa(min(w, portW))
}

// insertByBusID keeps PCI children ordered by bus ID as ncclTopoGetXmlFromSys does.
func insertByBusID(parent, n *Node) {
	id, _ := n.Get("busid")
	i := len(parent.Subs)
	for j, s := range parent.Subs {
		if b, ok := s.Get("busid"); ok && id < b {
			i = j
			break
		}
	}
	parent.Subs = slices.Insert(parent.Subs, i, n)
}

// nvlinks adds NVML's active NVLinks of GPU d as ncclTopoGetXmlFromGpu does: one
// <nvlink> per far end with its count; a far end outside this machine's PCI tree
// (NVML's FFFFFFFF:FF:FF.0, the NVSwitches of a VM) is taken as an NVSwitch.
func (b *xmlBuilder) nvlinks(g *Node, d *pcie.Device) {
	if b.m.GPU == nil {
		return
	}
	for _, f := range b.m.GPU.GPUs {
		if f.Address == nil || *f.Address != d.Address || f.NVLink == nil {
			continue
		}
		for _, l := range f.NVLink.Links {
			target, tclass := "ffffffff:ff:ff.0", "0x068000"
			if l.Remote != nil {
				target = l.Remote.String()
				if r := b.m.Topology.Device(*l.Remote); r != nil {
					tclass = fmt.Sprintf("0x%06x", r.Class)
				}
			}
			var x *Node
			for _, s := range g.Subs {
				if t, _ := s.Get("target"); s.Name == "nvlink" && t == target {
					x = s
				}
			}
			if x == nil {
				x = g.Add("nvlink", Attr{"target", target}, Attr{"count", "0"}, Attr{"tclass", tclass})
			}
			c, _ := x.Get("count")
			x.SetInt("count", atoi(c)+1)
		}
	}
}

// Input prepares the prediction for settings s: the topology XML as NCCL would
// detect it (also returned alone, for writing), with unknown compute capabilities
// taken as 0 for the prediction only, and NVML's P2P status as facts.
func (m *Machine) Input(s Settings, v Version, versionSource string) (in Input, topo *Node) {
	topo, nets, notes := m.XML(s)
	pred := cloneNode(topo)
	pred.Walk(func(n *Node) {
		if _, ok := n.Get("arch"); n.Name == "cpu" && !ok {
			n.Set("arch", "")
			notes = append(notes, "CPU architecture unknown: NCCL's CPU-specific defaults (P2P level, inter-CPU bandwidth) are not applied")
		}
		if n.Name != "gpu" {
			return
		}
		if _, ok := n.Get("sm"); !ok {
			n.SetInt("sm", 0)
			dev, _ := n.Get("dev")
			notes = append(notes, "compute capability unknown for GPU dev "+dev+" (NCCL asks CUDA); only P2P read mode and GPUDirect RDMA reads before Ampere depend on it")
		}
	})
	_, plugin, _ := m.Nets(s)
	in = Input{Topology: pred, Nets: nets, Settings: s, Version: v, VersionSource: versionSource, Notes: notes,
		Facts: Facts{NetPlugin: plugin, GDRDrv: m.GDRDrv}, Unknowns: m.unknowns(pred, nets)}
	if m.GPU != nil {
		in.Facts.P2P = map[[2]int]bool{}
		for _, p := range m.GPU.Pairs {
			r, w := p.P2P.Read, p.P2P.Write
			if r != nil && w != nil {
				in.Facts.P2P[[2]int{p.A, p.B}] = *r == gpu.P2POK && *w == gpu.P2POK
			}
		}
	}
	return in, topo
}

func cloneNode(n *Node) *Node {
	c := &Node{Name: n.Name, Attrs: slices.Clone(n.Attrs)}
	for _, s := range n.Subs {
		c.Subs = append(c.Subs, cloneNode(s))
	}
	return c
}
