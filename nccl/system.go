package nccl

import (
	"fmt"
	"strconv"
	"strings"
)

// CPU architectures and vendors as NCCL numbers them (NCCL 2.28, src/graph/topo.h
// NCCL_TOPO_CPU_ARCH_*, NCCL_TOPO_CPU_VENDOR_*, NCCL_TOPO_CPU_TYPE_*).
const (
	archX86       = 1
	archPower     = 2
	archARM       = 3
	vendorIntel   = 1
	vendorAMD     = 2
	vendorZhaoxin = 3
	modelBDW      = 0
	modelSKL      = 1
	modelSRP      = 2
	modelERP      = 3
	modelYongfeng = 1
)

const undef = -1

// Intel CPU models by the x86 model number from which ncclTopoAddCpu (NCCL 2.28,
// src/graph/topo.cc) gives each CPU type, family 6: Skylake 0x55, Sapphire Rapids
// 0x8F, Emerald Rapids 0xCF; Zhaoxin Yongfeng is family 7 model 0x5B.
const (
	intelFamily        = 6
	intelModelSKL      = 0x55
	intelModelSRP      = 0x8F
	intelModelERP      = 0xCF
	zhaoxinFamily      = 7
	zhaoxinModelYongfg = 0x5B
)

// Defaults of ncclTopoAddPci and ncclTopoAddNet (NCCL 2.28, src/graph/topo.cc):
// a link_width of 0 counts as x16, a network without a speed as 10 Gb/s, an
// unknown link_speed as Gen3 (60, in 100 Mb/s per lane); PCI bandwidth is
// width × speed / 80 GB/s and network bandwidth Mb/s / 8000 GB/s.
const (
	pciDefaultWidth = 16
	pciDefaultSpeed = 60
	pciBWDivisor    = 80.0
	netDefaultMbps  = 10000
	netMbpsPerGBps  = 8000.0
)

// Broadcom PEX switch IDs getBcmGen (NCCL 2.28, src/graph/topo.cc) recognises,
// the top 52 bits of the vendor:device:subsystem ID: Gen4 one value, Gen5 one
// per sub-switch level.
const (
	bcmIDMask = 0xfffffffffffff000
	bcmGen4ID = 0x1000c0101000a000
	bcmGen5ID = 0x1000c03010000000
)

// topoNode is struct ncclTopoNode: a GPU, PCI switch, NVSwitch, CPU (NUMA node), NIC
// or network device, with its links sorted by bandwidth and the paths from it to
// every node of the base types (filled by computePaths).
type topoNode struct {
	typ nodeType
	id  int64
	// idx is the node's index among the nodes of its type, gid among all nodes.
	idx, gid int
	links    []*topoLink
	paths    [nodeTypes][]topoPath

	// GPU
	dev, rank, sm, gdr int
	// CPU
	arch, vendor, model int
	// PCI switch: vendor<<48 | device<<32 | subsystem vendor<<16 | subsystem device
	pciDevice uint64
	// NET
	netDev  int
	netBW   float32
	netGDR  int
	netName string
	// busID is the bus ID string of the GPU or NIC's PCI node, for reports.
	busID string
}

type topoLink struct {
	typ linkType
	bw  float32
	rem *topoNode
}

// topoPath is struct ncclTopoLinkList: the links from a node to another, their
// count, the bottleneck bandwidth and the path type. Of the links only the first
// is kept: it is the only one NCCL reads outside path searches (the intermediate
// GPU of a two-hop path, ncclTopoCheckP2p).
type topoPath struct {
	first *topoLink
	count int
	bw    float32
	typ   PathType
}

// System is NCCL's topology graph of one node (struct ncclTopoSystem) with its
// computed paths.
type System struct {
	nodes [nodeTypes][]*topoNode
	// all holds every node by its gid, byRank the GPUs by rank.
	all    []*topoNode
	byRank map[int]*topoNode
	ids    map[nodeKey]*topoNode
	ver    Version
	lim    limits
	// err is the first limit of NCCL's a link went beyond (ncclTopoConnectNodes).
	err error
	// work counts the links path searches examined: what computing the paths
	// cost, for tests that bound it.
	work int64
}

// label names a node as NCCL's INFO lines do: "GPU/0-60", "CPU/0-ffffffffffffff".
func (n *topoNode) label() string {
	return nodeNames[n.typ] + "/" + strconv.FormatUint(uint64(n.id)>>56, 16) + "-" + strconv.FormatUint(uint64(n.id)&0x00ffffffffffffff, 16)
}

func topoID(system int, local int64) int64 { return int64(system)<<56 + local&0x00ffffffffffffff }

// nodeKey identifies a node while the system is built.
type nodeKey struct {
	typ nodeType
	id  int64
}

// find is ncclTopoGetNode: the node of type typ with id id, or nil.
func (s *System) find(typ nodeType, id int64) *topoNode { return s.ids[nodeKey{typ, id}] }

// create is ncclTopoCreateNode (src/graph/topo.cc), which fails beyond
// NCCL_TOPO_MAX_NODES nodes of one type.
func (s *System) create(typ nodeType, id int64) (*topoNode, error) {
	if len(s.nodes[typ]) >= s.lim.nodes {
		return nil, fmt.Errorf("%w: more than %d %s nodes, which NCCL %s cannot hold (NCCL_TOPO_MAX_NODES, %s)", ErrLimit, s.lim.nodes, nodeNames[typ], s.ver, s.lim.nodesSrc)
	}
	n := &topoNode{typ: typ, id: id, dev: undef, rank: undef, sm: undef, arch: undef, vendor: undef, model: undef}
	s.nodes[typ] = append(s.nodes[typ], n)
	if s.ids == nil {
		s.ids = map[nodeKey]*topoNode{}
	}
	if s.ids[nodeKey{typ, id}] == nil {
		s.ids[nodeKey{typ, id}] = n
	}
	return n, nil
}

// connect is ncclTopoConnectNodes (src/graph/topo.cc): links of one type to one
// node aggregate their bandwidth, and links stay sorted by bandwidth, highest first.
// Beyond NCCL_TOPO_MAX_LINKS links of one node NCCL fails; so does NewSystem.
func (s *System) connect(n, rem *topoNode, typ linkType, bw float32) {
	i := -1
	for j, l := range n.links {
		if l.rem == rem && l.typ == typ {
			i = j
			break
		}
	}
	if i < 0 {
		if len(n.links) >= s.lim.links {
			if s.err == nil {
				s.err = fmt.Errorf("%w: a %s node with more than %d links, which NCCL %s cannot hold (NCCL_TOPO_MAX_LINKS, %s)", ErrLimit, nodeNames[n.typ], s.lim.links, s.ver, s.lim.linksSrc)
			}
			return
		}
		n.links = append(n.links, &topoLink{typ: typ, rem: rem})
		i = len(n.links) - 1
	}
	l := n.links[i]
	l.bw += bw
	for i > 0 && n.links[i-1].bw < l.bw {
		n.links[i] = n.links[i-1]
		i--
	}
	n.links[i] = l
}

// kvPrefix is kvConvertToInt (src/graph/xml.h): the first entry that is a prefix of
// s, else the fallback.
func kvPrefix(s string, dict []kv, fallback int) int {
	for _, d := range dict {
		if strings.HasPrefix(s, d.s) {
			return d.v
		}
	}
	return fallback
}

type kv struct {
	s string
	v int
}

// kvDictPciClass and kvDictPciGen in src/graph/topo.cc; speeds are in 100 Mb/s per lane.
var (
	pciClassDict = []kv{{"0x060400", int(nodePCI)}, {"0x080100", int(nodePCI)}, {"0x068000", int(nodeNVS)}, {"0x068001", int(nodeCPU)}, {"0x03", int(nodeGPU)}, {"0x02", int(nodeNIC)}}
	pciGenDict   = []kv{{"2.5 GT/s", 15}, {"5 GT/s", 30}, {"8 GT/s", 60}, {"16 GT/s", 120}, {"32 GT/s", 240},
		{"2.5 GT/s PCIe", 15}, {"5.0 GT/s PCIe", 30}, {"8.0 GT/s PCIe", 60}, {"16.0 GT/s PCIe", 120}, {"32.0 GT/s PCIe", 240}, {"64.0 GT/s PCIe", 480}}
	cpuArchDict   = []kv{{"x86_64", archX86}, {"arm64", archARM}, {"ppc64", archPower}}
	cpuVendorDict = []kv{{"GenuineIntel", vendorIntel}, {"AuthenticAMD", vendorAMD}, {"CentaurHauls", vendorZhaoxin}, {"  Shanghai  ", vendorZhaoxin}}
)

func need(n *Node, key string) (string, error) {
	v, ok := n.Get(key)
	if !ok {
		return "", fmt.Errorf("%w: <%s> has no %s attribute", ErrBadXML, n.Name, key)
	}
	return v, nil
}

func needInt(n *Node, key string) (int, error) {
	v, err := need(n, key)
	return atoi(v), err
}

func intDefault(n *Node, key string, def int) int {
	if v, ok := n.Get(key); ok {
		return atoi(v)
	}
	return def
}

// NewSystem builds NCCL's graph from a topology XML as ncclTopoGetSystemFromXml
// (src/graph/topo.cc) does for the local host: CPU nodes and the PCI trees below
// them, then NVLinks, C2C links and Broadcom P2P links, Broadcom PEX switches
// flattened, CPUs joined, links sorted. Host hashes are ignored: every <cpu> is
// taken to be on this host, as in a file NCCL_TOPO_FILE names (NCCL rewrites them).
func NewSystem(root *Node) (*System, error) { return newSystem(root, DefaultVersion) }

// newSystem is NewSystem within the limits of NCCL release v.
func newSystem(root *Node, v Version) (*System, error) {
	if root == nil || root.Name != "system" {
		return nil, fmt.Errorf("%w: top element is not <system>", ErrBadXML)
	}
	if v, err := needInt(root, "version"); err != nil || v != 1 {
		return nil, fmt.Errorf("%w: <system version> must be 1 (NCCL_TOPO_XML_VERSION)", ErrBadXML)
	}
	if err := checkXMLLimits(root); err != nil {
		return nil, err
	}
	s := &System{ver: v, lim: limitsOf(v)}
	for _, c := range root.Subs {
		if c.Name == "cpu" {
			if err := s.addCPU(c); err != nil {
				return nil, err
			}
		}
	}
	if err := s.addNVLinks(root, ""); err != nil {
		return nil, err
	}
	if err := s.addC2C(root, ""); err != nil {
		return nil, err
	}
	s.addPCILinks(root, "")
	s.flattenBcmSwitches()
	s.connectCPUs()
	for _, c := range s.nodes[nodeCPU] {
		sortLinks(c, nil, 0)
	}
	if s.err != nil {
		return nil, s.err
	}
	s.number()
	return s, nil
}

// checkXMLLimits refuses a topology NCCL's XML cannot hold: more than MAX_SUBS
// (128) children or MAX_ATTR_COUNT (16) attributes of one element (src/graph/xml.h;
// xmlAddNode fails, and NCCL with it), or deeper than ParseXML reads.
func checkXMLLimits(root *Node) error {
	var walk func(n *Node, depth int) error
	walk = func(n *Node, depth int) error {
		switch {
		case depth > maxXMLDepth:
			return fmt.Errorf("%w: deeper than %d levels", ErrBadXML, maxXMLDepth)
		case len(n.Subs) > maxSubs:
			return fmt.Errorf("%w: <%s> has %d children, NCCL's XML holds at most %d (MAX_SUBS, src/graph/xml.h)", ErrLimit, n.Name, len(n.Subs), maxSubs)
		case len(n.Attrs) > maxAttrs:
			return fmt.Errorf("%w: <%s> has %d attributes, NCCL's XML holds at most %d (MAX_ATTR_COUNT, src/graph/xml.h)", ErrLimit, n.Name, len(n.Attrs), maxAttrs)
		}
		for _, c := range n.Subs {
			if err := walk(c, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(root, 0)
}

// number gives every node its indexes and maps the GPUs by rank.
func (s *System) number() {
	s.all = s.all[:0]
	s.byRank = map[int]*topoNode{}
	for t := range s.nodes {
		for i, n := range s.nodes[t] {
			n.idx, n.gid = i, len(s.all)
			s.all = append(s.all, n)
			if nodeType(t) == nodeGPU {
				if _, dup := s.byRank[n.rank]; !dup {
					s.byRank[n.rank] = n
				}
			}
		}
	}
}

// addCPU is ncclTopoAddCpu.
func (s *System) addCPU(x *Node) error {
	numa, err := needInt(x, "numaid")
	if err != nil {
		return err
	}
	cpu, err := s.create(nodeCPU, topoID(0, int64(numa)))
	if err != nil {
		return err
	}
	if err := cpuModel(cpu, x); err != nil {
		return err
	}
	for _, sub := range x.Subs {
		switch sub.Name {
		case "pci":
			if err := s.addPCI(sub, cpu, numa); err != nil {
				return err
			}
		case "nic":
			id := topoID(0, int64(numa)<<56)
			nic := s.find(nodeNIC, id)
			if nic == nil {
				if nic, err = s.create(nodeNIC, id); err != nil {
					return err
				}
				s.connect(cpu, nic, linkPCI, locBW)
				s.connect(nic, cpu, linkPCI, locBW)
			}
			if err := s.addNIC(sub, nic, ""); err != nil {
				return err
			}
		}
	}
	return nil
}

// cpuModel reads a <cpu>'s architecture, vendor and model class as ncclTopoAddCpu
// does: Intel by family 6 and model (Emerald Rapids from 0xCF, Sapphire Rapids from
// 0x8F, Skylake from 0x55, else Broadwell), Zhaoxin Yongfeng by family 7 model 0x5B.
func cpuModel(cpu *topoNode, x *Node) error {
	arch, err := need(x, "arch")
	if err != nil {
		return err
	}
	cpu.arch = kvPrefix(arch, cpuArchDict, 0)
	if cpu.arch != archX86 {
		return nil
	}
	vendor, err := need(x, "vendor")
	if err != nil {
		return err
	}
	cpu.vendor = kvPrefix(vendor, cpuVendorDict, 0)
	if cpu.vendor != vendorIntel && cpu.vendor != vendorZhaoxin {
		return nil
	}
	fam, err1 := needInt(x, "familyid")
	model, err2 := needInt(x, "modelid")
	if err1 != nil || err2 != nil {
		return fmt.Errorf("%w: %s <cpu> needs familyid and modelid", ErrBadXML, vendor)
	}
	switch {
	case cpu.vendor == vendorZhaoxin:
		if fam == zhaoxinFamily && model == zhaoxinModelYongfg {
			cpu.model = modelYongfeng
		}
	case fam == intelFamily && model >= intelModelERP:
		cpu.model = modelERP
	case fam == intelFamily && model >= intelModelSRP:
		cpu.model = modelSRP
	case fam == intelFamily && model >= intelModelSKL:
		cpu.model = modelSKL
	default:
		cpu.model = modelBDW
	}
	return nil
}

// addPCI is ncclTopoAddPci.
func (s *System) addPCI(x *Node, parent *topoNode, numa int) error {
	class, err := need(x, "class")
	if err != nil {
		return err
	}
	typ := nodeType(kvPrefix(class, pciClassDict, int(nodePCI)))
	busStr, err := need(x, "busid")
	if err != nil {
		return err
	}
	busID := busIDToInt64(busStr)
	var n *topoNode
	if g := x.Sub("gpu"); g != nil {
		if _, ok := g.Get("rank"); !ok {
			return nil
		}
		if n, err = s.create(nodeGPU, topoID(0, busID)); err != nil {
			return err
		}
		n.busID = busStr
		for _, f := range []struct {
			key string
			dst *int
		}{{"sm", &n.sm}, {"rank", &n.rank}, {"dev", &n.dev}, {"gdr", &n.gdr}} {
			if *f.dst, err = needInt(g, f.key); err != nil {
				return err
			}
		}
	}
	if nx := x.Sub("nic"); nx != nil {
		id := topoID(0, int64(numa)<<56+busID)
		nic := s.find(nodeNIC, id)
		if nic == nil {
			if nic, err = s.create(nodeNIC, id); err != nil {
				return err
			}
			n = nic
		}
		if err := s.addNIC(nx, nic, busStr); err != nil {
			return err
		}
	} else if typ == nodePCI && n == nil {
		if n, err = s.create(nodePCI, topoID(0, busID)); err != nil {
			return err
		}
		for i, key := range []string{"vendor", "device", "subsystem_vendor", "subsystem_device"} {
			if v, ok := x.Get(key); ok {
				p, _ := strtoll(v)
				n.pciDevice += uint64(p) << (48 - 16*i)
			}
		}
		for _, sub := range x.Subs {
			if sub.Name != "pcilink" {
				if err := s.addPCI(sub, n, numa); err != nil {
					return err
				}
			}
		}
	}
	if n == nil {
		return nil
	}
	width, err := needInt(x, "link_width")
	if err != nil {
		return err
	}
	speedStr, err := need(x, "link_speed")
	if err != nil {
		return err
	}
	if width == 0 {
		width = pciDefaultWidth
	}
	speed := kvPrefix(speedStr, pciGenDict, pciDefaultSpeed)
	bw := float32(float64(width*speed) / pciBWDivisor)
	s.connect(n, parent, linkPCI, bw)
	s.connect(parent, n, linkPCI, bw)
	return nil
}

// addNIC is ncclTopoAddNic and ncclTopoAddNet: every <net> with a dev attribute
// becomes a NET node linked to the NIC with its speed.
func (s *System) addNIC(x *Node, nic *topoNode, busID string) error {
	for _, nx := range x.Subs {
		if nx.Name != "net" {
			continue
		}
		if _, ok := nx.Get("dev"); !ok {
			continue
		}
		dev := intDefault(nx, "dev", 0)
		net, err := s.create(nodeNET, topoID(0, int64(dev)))
		if err != nil {
			return err
		}
		net.netDev = dev
		net.netName, _ = nx.Get("name")
		net.busID = busID
		mbps := intDefault(nx, "speed", 0)
		if mbps <= 0 {
			mbps = netDefaultMbps
		}
		net.netBW = float32(float64(mbps) / netMbpsPerGBps)
		net.netGDR = intDefault(nx, "gdr", 0)
		s.connect(nic, net, linkNET, net.netBW)
		s.connect(net, nic, linkNET, net.netBW)
	}
	return nil
}

// addNVLinks is ncclTopoAddNvLinks: an <nvlink> below a GPU joins it to the GPU it
// targets, its local CPU, or the one NVSwitch node, count links of the GPU's
// NVLink bandwidth.
func (s *System) addNVLinks(x *Node, parentBus string) error {
	if x.Name == "nvlink" {
		gpu := s.find(nodeGPU, topoID(0, busIDToInt64(parentBus)))
		if gpu == nil {
			return nil // the GPU had no rank and was left out
		}
		count, err := needInt(x, "count")
		if err != nil {
			return err
		}
		tclass, err := need(x, "tclass")
		if err != nil {
			return err
		}
		var remote *topoNode
		switch nodeType(kvPrefix(tclass, pciClassDict, int(nodePCI))) {
		case nodeGPU:
			target, err := need(x, "target")
			if err != nil {
				return err
			}
			remote = s.find(nodeGPU, topoID(0, busIDToInt64(target)))
		case nodeCPU:
			remote = localCPU(gpu, nil)
		default:
			if len(s.nodes[nodeNVS]) == 0 {
				if remote, err = s.create(nodeNVS, 0); err != nil {
					return err
				}
			} else {
				remote = s.nodes[nodeNVS][0]
			}
		}
		if remote != nil {
			bw := float32(count) * nvlinkBW(gpu.sm, s.ver)
			s.connect(gpu, remote, linkNVL, bw)
			if remote.typ != nodeGPU {
				s.connect(remote, gpu, linkNVL, bw)
			}
		}
		return nil
	}
	bus := parentBus
	if b, ok := x.Get("busid"); ok {
		bus = b
	}
	for _, sub := range x.Subs {
		if err := s.addNVLinks(sub, bus); err != nil {
			return err
		}
	}
	return nil
}

// addC2C is ncclTopoAddC2c: a <c2c> below a GPU links it to its local CPU.
func (s *System) addC2C(x *Node, parentBus string) error {
	if x.Name == "c2c" {
		gpu := s.find(nodeGPU, topoID(0, busIDToInt64(parentBus)))
		if gpu == nil {
			return nil
		}
		count, err1 := needInt(x, "count")
		bw, err2 := needInt(x, "bw")
		if err1 != nil || err2 != nil {
			return fmt.Errorf("%w: <c2c> needs count and bw", ErrBadXML)
		}
		cpu := localCPU(gpu, nil)
		if cpu == nil {
			return nil
		}
		c2c := float32(float64(bw*count) / 1000.0)
		s.connect(gpu, cpu, linkC2C, c2c)
		s.connect(cpu, gpu, linkC2C, c2c)
		return nil
	}
	bus := parentBus
	if b, ok := x.Get("busid"); ok {
		bus = b
	}
	for _, sub := range x.Subs {
		if err := s.addC2C(sub, bus); err != nil {
			return err
		}
	}
	return nil
}

// addPCILinks is ncclTopoAddPciLinks: a <pcilink> joins two PCI switches with a
// LOC link (Broadcom virtual-switch P2P links).
func (s *System) addPCILinks(x *Node, parentBus string) {
	if x.Name == "pcilink" {
		pci := s.find(nodePCI, topoID(0, busIDToInt64(parentBus)))
		target, _ := x.Get("target")
		remote := s.find(nodePCI, topoID(0, busIDToInt64(target)))
		if pci != nil && remote != nil {
			s.connect(pci, remote, linkLOC, locBW)
		}
		return
	}
	bus := parentBus
	if b, ok := x.Get("busid"); ok {
		bus = b
	}
	for _, sub := range x.Subs {
		s.addPCILinks(sub, bus)
	}
}

// localCPU is findLocalCpu: up the PCI links, through PCI switches only, to a CPU.
func localCPU(n, from *topoNode) *topoNode {
	if n.typ == nodeCPU {
		return n
	}
	for _, l := range n.links {
		if l.typ == linkPCI && l.rem != from && (l.rem.typ == nodePCI || l.rem.typ == nodeCPU) {
			if c := localCPU(l.rem, n); c != nil {
				return c
			}
		}
	}
	return nil
}

// bcmGen is getBcmGen (src/graph/topo.cc).
func bcmGen(id uint64, level int) int {
	switch {
	case id&bcmIDMask == bcmGen4ID:
		return 4
	case id&bcmIDMask == bcmGen5ID|uint64(level)*0x1000:
		return 5
	}
	return 0
}

// flattenBcmSwitches is ncclTopoFlattenBcmSwitches: a Broadcom PEX Gen4/Gen5 switch
// absorbs the sub-switches of the same generation right below it.
func (s *System) flattenBcmSwitches() {
	for i := 0; i < len(s.nodes[nodePCI]); i++ {
		sw := s.nodes[nodePCI][i]
		gen := bcmGen(sw.pciDevice, 0)
		if gen == 0 {
			continue
		}
		var subs []*topoNode
		kept := sw.links[:0:0]
		for _, l := range sw.links {
			if l.rem.typ == nodePCI && bcmGen(l.rem.pciDevice, 1) == gen {
				subs = append(subs, l.rem)
				continue
			}
			kept = append(kept, l)
		}
		sw.links = kept
		for _, sub := range subs {
			for _, l := range sub.links {
				if l.rem == sw {
					continue
				}
				sw.links = append(sw.links, l)
				for _, rl := range l.rem.links {
					if rl.rem == sub {
						rl.rem = sw
						break
					}
				}
			}
			s.remove(sub)
		}
		sw.pciDevice |= 0xffff
		i = -1 // restart, as NCCL does
	}
}

// remove is ncclTopoRemoveNode: the node and every link to it go.
func (s *System) remove(del *topoNode) {
	for t := range s.nodes {
		for _, n := range s.nodes[t] {
			kept := n.links[:0]
			for _, l := range n.links {
				if l.rem != del {
					kept = append(kept, l)
				}
			}
			n.links = kept
		}
	}
	if s.ids[nodeKey{del.typ, del.id}] == del {
		delete(s.ids, nodeKey{del.typ, del.id})
	}
	list := s.nodes[del.typ]
	for i, n := range list {
		if n == del {
			s.nodes[del.typ] = append(list[:i:i], list[i+1:]...)
			return
		}
	}
}

// connectCPUs is ncclTopoConnectCpus: every pair of CPU nodes is joined by a SYS
// link of the inter-CPU bandwidth (ncclTopoGetInterCpuBw, see interCPUBW).
func (s *System) connectCPUs() {
	for _, a := range s.nodes[nodeCPU] {
		for _, b := range s.nodes[nodeCPU] {
			if a != b {
				s.connect(a, b, linkSYS, interCPUBW(a, s.ver))
			}
		}
	}
}

// sortLinks is ncclTopoSort: below each node the link to its parent moves last, so
// links read NVLink, PCI down, PCI up, SYS. depth bounds the recursion.
func sortLinks(n, up *topoNode, depth int) {
	if depth > maxXMLDepth {
		return
	}
	if up != nil {
		for i, l := range n.links {
			if l.rem == up {
				n.links = append(append(n.links[:i:i], n.links[i+1:]...), l)
				break
			}
		}
	}
	for _, l := range n.links {
		if l.typ == linkPCI && l.rem != up {
			sortLinks(l.rem, n, depth+1)
		}
	}
}
