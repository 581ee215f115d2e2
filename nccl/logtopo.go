package nccl

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// printedTopo is the topology NCCL printed at NCCL_DEBUG_SUBSYS=GRAPH
// (ncclTopoPrint and ncclTopoPrintRec in src/graph/topo.cc): every node with its
// links in NCCL's order, read back so that NCCL's rules can be applied to it as
// to a topology XML. NCCL prints each node of its PCI trees below its CPU, each
// node's links but the one to the node it was reached from (which ncclTopoSort
// put last), and non-PCI links' far ends as leaves; bandwidths with one decimal
// (a network device's exactly, in its own attributes).
type printedTopo struct {
	nodes []*pnode
	// gdrNet gives a network device's GPUDirect RDMA support by device index,
	// from the log's "GPU Direct RDMA Enabled|Disabled for HCA" lines; missing
	// when NCCL printed none.
	gdrNet map[int]bool
	// dev gives each GPU's NVML index by bus ID, from the "Init START" lines.
	dev map[int64]int
	// names gives network devices' names by index.
	names map[int]string
}

type pnode struct {
	typ   nodeType
	id    int64
	attrs []string
	links []plink
}

type plink struct {
	typ linkType
	bw  float32
	to  *pnode
}

var (
	printedNode = lazyRegexp(`^(GPU|PCI|NVS|CPU|NIC|NET)/([0-9a-fA-F]{1,16})(?:-([0-9a-fA-F]{1,16}))?(?: \(([^)]*)\))?$`)
	printedLink = lazyRegexp(`^\+ ([A-Z0-9]{3})\[([0-9.]+)\] - (.*)$`)
)

// linkNames are topoLinkTypeStr (src/graph/topo.cc) by link type.
var linkNames = map[string]linkType{"LOC": linkLOC, "NVL": linkNVL, "C2C": linkC2C, "PCI": linkPCI, "SYS": linkSYS, "NET": linkNET}

// parsePrinted reads the lines of one ncclTopoPrint, the "=== System" line
// first. It fails on a line it cannot place, rather than guess.
func parsePrinted(lines []string) (*printedTopo, error) {
	t := &printedTopo{gdrNet: map[int]bool{}, dev: map[int64]int{}, names: map[int]string{}}
	byKey := map[nodeKey]*pnode{}
	type open struct {
		col int
		n   *pnode
	}
	var stack []open
	var ups []struct {
		child, parent *pnode
		bw            float32
	}
	for i, line := range lines {
		if i == 0 && strings.HasPrefix(line, "=== System") {
			continue
		}
		text := strings.TrimLeft(line, " ")
		col := len(line) - len(text)
		if !strings.HasPrefix(text, "+ ") {
			n, err := t.node(byKey, text)
			if err != nil || col != 0 || n.typ != nodeCPU {
				return nil, fmt.Errorf("%w: topology line %q is not a CPU", ErrBadXML, line)
			}
			stack = []open{{0, n}}
			continue
		}
		for len(stack) > 0 && stack[len(stack)-1].col > col {
			stack = stack[:len(stack)-1]
		}
		m := printedLink().FindStringSubmatch(text)
		if m == nil || len(stack) == 0 || stack[len(stack)-1].col != col {
			return nil, fmt.Errorf("%w: topology line %q", ErrBadXML, line)
		}
		typ, ok := linkNames[m[1]]
		if !ok {
			return nil, fmt.Errorf("%w: topology line %q", ErrBadXML, line)
		}
		bw, err := strconv.ParseFloat(m[2], 32)
		if err != nil {
			return nil, fmt.Errorf("%w: topology line %q", ErrBadXML, line)
		}
		to, err := t.node(byKey, m[3])
		if err != nil {
			return nil, fmt.Errorf("%w: topology line %q: %w", ErrBadXML, line, err)
		}
		from := stack[len(stack)-1].n
		if len(from.links) >= maxKept {
			return nil, fmt.Errorf("%w: too many links", ErrLimit)
		}
		from.links = append(from.links, plink{typ: typ, bw: float32(bw), to: to})
		if typ == linkPCI {
			stack = append(stack, open{col + len(text) - len(m[3]), to})
			ups = append(ups, struct {
				child, parent *pnode
				bw            float32
			}{to, from, float32(bw)})
		}
	}
	// The link back up each PCI tree, which NCCL does not print, comes last.
	for _, u := range ups {
		u.child.links = append(u.child.links, plink{typ: linkPCI, bw: u.bw, to: u.parent})
	}
	t.reverseLinks()
	return t, nil
}

// node finds or makes the node a printed label names.
func (t *printedTopo) node(byKey map[nodeKey]*pnode, text string) (*pnode, error) {
	m := printedNode().FindStringSubmatch(text)
	if m == nil {
		return nil, fmt.Errorf("not a node: %q", text)
	}
	typ := nodeType(slices.Index(nodeNames[:], m[1]))
	var id int64
	if m[3] != "" {
		sys, err1 := strconv.ParseUint(m[2], 16, 8)
		local, err2 := strconv.ParseUint(m[3], 16, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("not a node: %q", text)
		}
		id = topoID(int(sys), int64(local))
	} else {
		v, err := strconv.ParseUint(m[2], 16, 64)
		if err != nil {
			return nil, fmt.Errorf("not a node: %q", text)
		}
		id = int64(v)
	}
	k := nodeKey{typ, id}
	n := byKey[k]
	if n == nil {
		if len(t.nodes) >= 6*maxTopoNodesEver {
			return nil, fmt.Errorf("%w: too many nodes", ErrLimit)
		}
		n = &pnode{typ: typ, id: id}
		byKey[k] = n
		t.nodes = append(t.nodes, n)
	}
	if m[4] != "" && n.attrs == nil {
		n.attrs = strings.Split(m[4], "/")
	}
	return n, nil
}

// maxTopoNodesEver is the largest NCCL_TOPO_MAX_NODES of any release.
const maxTopoNodesEver = 640

// reverseLinks adds the links NCCL has and does not print: from a network
// device to its NIC, and from an NVSwitch (or a CPU) back to the GPUs whose
// NVLinks reach it, each kept sorted by bandwidth as ncclTopoConnectNodes keeps
// them.
func (t *printedTopo) reverseLinks() {
	for _, n := range t.nodes {
		for _, l := range n.links {
			back := l.typ == linkNET || l.typ == linkNVL && l.to.typ != nodeGPU
			if back && !hasLink(l.to, n, l.typ) {
				l.to.links = append(l.to.links, plink{typ: l.typ, bw: l.bw, to: n})
			}
		}
	}
	for _, n := range t.nodes {
		if n.typ == nodeNVS || n.typ == nodeNET {
			slices.SortStableFunc(n.links, func(a, b plink) int { return cmp.Compare(b.bw, a.bw) })
		}
	}
}

func hasLink(n, to *pnode, typ linkType) bool {
	return slices.ContainsFunc(n.links, func(l plink) bool { return l.to == to && l.typ == typ })
}

// build makes NCCL's system of the printed topology for release v. What NCCL
// does not print is taken as unknown: a GPU's compute capability (0) and its
// GPUDirect RDMA support (none), a network device's support where no "GPU
// Direct RDMA ... for HCA" line gave it; Unknowns hold the alternatives.
func (t *printedTopo) build(v Version) (*System, error) {
	s := &System{ver: v, lim: limitsOf(v)}
	made := map[*pnode]*topoNode{}
	for _, p := range t.nodes {
		n, err := s.create(p.typ, p.id)
		if err != nil {
			return nil, err
		}
		t.fill(n, p)
		made[p] = n
	}
	for _, p := range t.nodes {
		n := made[p]
		if len(p.links) > s.lim.links {
			return nil, fmt.Errorf("%w: a %s node with more than %d links (NCCL_TOPO_MAX_LINKS, %s)", ErrLimit, nodeNames[p.typ], s.lim.links, s.lim.linksSrc)
		}
		for _, l := range p.links {
			bw := l.bw
			if l.typ == linkNET {
				// The link has the network device's bandwidth, which its
				// attributes print exactly.
				bw = max(made[l.to].netBW, n.netBW)
			}
			n.links = append(n.links, &topoLink{typ: l.typ, bw: bw, rem: made[l.to]})
		}
	}
	s.number()
	return s, nil
}

// fill sets what the print says of a node: a GPU's rank, a CPU's architecture,
// vendor and model, a PCI switch's IDs, a network device's bandwidth.
func (t *printedTopo) fill(n *topoNode, p *pnode) {
	a := func(i int) string {
		if i < len(p.attrs) {
			return p.attrs[i]
		}
		return ""
	}
	switch p.typ {
	case nodeGPU:
		n.rank, n.sm, n.gdr = atoi(a(0)), 0, 0
		n.dev = n.rank
		if d, ok := t.dev[p.id&0x00ffffffffffffff]; ok {
			n.dev = d
		}
		n.busID = fmt.Sprintf("%x", p.id&0x00ffffffffffffff)
	case nodeCPU:
		n.arch, n.vendor, n.model = atoi(a(0)), atoi(a(1)), atoi(a(2))
		if n.vendor == vendorIntel {
			n.model-- // printed NCCL_TOPO_CPU_MODEL_INTEL_*: BDW is 1
		}
	case nodePCI:
		d, _ := strconv.ParseUint(a(0), 16, 64)
		n.pciDevice = d
	case nodeNET:
		n.netDev = int(p.id & 0x00ffffffffffffff)
		if bw, err := strconv.ParseFloat(a(len(p.attrs)-1), 32); err == nil {
			n.netBW = float32(bw)
		}
		if g, ok := t.gdrNet[n.netDev]; ok && g {
			n.netGDR = 1
		}
		n.netName = t.names[n.netDev]
	}
}
