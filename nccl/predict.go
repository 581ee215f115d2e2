package nccl

import (
	"fmt"
	"slices"
	"strconv"
)

// Facts are what NCCL learns outside its topology XML.
type Facts struct {
	// P2P is NVML's P2P read and write status between two GPUs by NVML index
	// (ncclNvmlDevicePairs in src/misc/nvmlwrap.cc): true when both are OK. A
	// missing pair is unknown, taken as OK and said so.
	P2P map[[2]int]bool
	// NetPlugin names the network transport as NCCL names it ("IB", "Socket", or
	// an external plugin's name); empty when unknown.
	NetPlugin string
	// GDRDrv reports gdrdrv loaded with /dev/gdrdrv; nil when unknown.
	GDRDrv *bool
}

// engine evaluates NCCL's rules on one system under one set of settings.
type engine struct {
	sys *System
	// raw holds the paths of the topology before NCCL diverts any, for reasons.
	raw   *System
	set   Settings
	ver   Version
	facts Facts
	// unknown lists the facts taken as assumed, deduplicated; noted those of the
	// decision being made, and cited the NCCL functions it applied.
	unknown []string
	noted   []string
	cited   []string
	// netBest is, per GPU, the best bandwidth to a network device at PXB or
	// closer (ncclTopoCheckNet), nvlPeer whether the GPU has an NVLink peer
	// (ncclTopoCheckGdr); both computed on first use.
	netBest []float32
	nvlPeer []int8
	// texts memoizes reasons built from a few values, which repeat across pairs.
	texts map[textKey]string
}

// textKey is what a memoized reason is made of.
type textKey struct {
	format string
	a, b   PathType
	src    string
}

// text is fmt.Sprintf(format, a, b, src), memoized.
func (e *engine) text(format string, a, b PathType, src string) string {
	k := textKey{format, a, b, src}
	if s, ok := e.texts[k]; ok {
		return s
	}
	if e.texts == nil {
		e.texts = map[textKey]string{}
	}
	s := fmt.Sprintf(format, a, b, src)
	e.texts[k] = s
	return s
}

func (e *engine) assume(s string) {
	if !slices.Contains(e.unknown, s) {
		e.unknown = append(e.unknown, s)
	}
	if !slices.Contains(e.noted, s) {
		e.noted = append(e.noted, s)
	}
}

// cite records that the decision being made applied NCCL's rule key.
func (e *engine) cite(keys ...string) {
	for _, k := range keys {
		if !slices.Contains(e.cited, k) {
			e.cited = append(e.cited, k)
		}
	}
}

// begin starts a decision: its assumptions and rules are recorded afresh.
func (e *engine) begin() { e.noted, e.cited = e.noted[:0], e.cited[:0] }

// join is a+b+c, memoized: reasons are made of a few parts that repeat.
func (e *engine) join(a, b, c string) string {
	k := textKey{format: a, src: b + "\x00" + c}
	if s, ok := e.texts[k]; ok {
		return s
	}
	if e.texts == nil {
		e.texts = map[textKey]string{}
	}
	s := a + b + c
	e.texts[k] = s
	return s
}

// userLevel is ncclGetLevel (src/graph/paths.cc): disableEnv=1 means LOC, else the
// level named by levelEnv; ok is false when neither is set to something usable.
func (e *engine) userLevel(disableEnv, levelEnv string) (PathType, bool) {
	if disableEnv != "" {
		if v, ok := e.set.Get(disableEnv); ok {
			if n, _ := strtoll(v.Value); n == 1 {
				return PathLOC, true
			}
		}
	}
	if v, ok := e.set.Get(levelEnv); ok {
		return ParseLevel(v.Value)
	}
	return 0, false
}

func (e *engine) cpuType() (arch, vendor int) {
	if len(e.sys.nodes[nodeCPU]) == 0 {
		return undef, undef
	}
	c := e.sys.nodes[nodeCPU][0]
	return c.arch, c.vendor
}

// p2pLevel is the farthest path type P2P may take by default, per release:
// ncclTopoCheckP2p in src/graph/paths.cc. From 2.23 it is PXB, or SYS on x86 AMD
// CPUs with at most two GPUs; before 2.23 it was SYS except PXB on ARM, Intel and
// Zhaoxin CPUs. NCCL_P2P_DISABLE=1 or NCCL_P2P_LEVEL override it.
func (e *engine) p2pLevel() (PathType, string) {
	if l, ok := e.userLevel("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL"); ok {
		if v, ok := e.set.Get("NCCL_P2P_DISABLE"); ok && l == PathLOC && v.Value != "" {
			if n, _ := strtoll(v.Value); n == 1 {
				return l, "NCCL_P2P_DISABLE=1"
			}
		}
		return l, "NCCL_P2P_LEVEL=" + l.String()
	}
	arch, vendor := e.cpuType()
	if e.ver.AtLeast(2, 23) {
		if arch == archX86 && vendor == vendorAMD && len(e.sys.nodes[nodeGPU]) <= 2 {
			return PathSYS, "default on x86 AMD CPUs with at most two GPUs"
		}
		return PathPXB, "default"
	}
	if arch == archARM || arch == archX86 && (vendor == vendorIntel || vendor == vendorZhaoxin) {
		return PathPXB, "default before 2.23 on ARM, Intel and Zhaoxin CPUs"
	}
	return PathSYS, "default before 2.23"
}

// nvmlP2P reports NVML's read and write P2P status between two GPUs.
func (e *engine) nvmlP2P(a, b *topoNode) bool {
	ok, known := e.facts.P2P[[2]int{a.dev, b.dev}]
	if !known {
		e.assume("NVML's P2P status between GPUs is unknown (no NVML facts); taken as OK")
		return true
	}
	return ok
}

// checkP2P is ncclTopoCheckP2p (src/graph/paths.cc) for two GPUs of this node: P2P
// when their path type is no farther than the P2P level and NVML reports P2P
// reads and writes OK along it (through an intermediate GPU for NVB paths).
func (e *engine) checkP2P(g1, g2 *topoNode) (p2p bool, inter *topoNode, why string) {
	e.cite(ruleCheckP2P)
	path := path(g1, nodeGPU, g2.idx)
	if path.count == 2 && path.first != nil && path.first.rem.typ == nodeGPU {
		inter = path.first.rem
	}
	level, src := e.p2pLevel()
	if path.typ > level {
		return false, inter, e.text("path %s is farther than the P2P level %s (%s)", e.rawType(g1, g2, path.typ), level, src)
	}
	if g1 != g2 && e.set.Int("NCCL_IGNORE_DISABLED_P2P", 0) != 2 {
		hops := [3]*topoNode{g1, inter, g2}
		n := 3
		if inter == nil {
			hops[1], n = g2, 2
		}
		for i := 1; i < n; i++ {
			if !e.nvmlP2P(hops[i-1], hops[i]) {
				if path.typ <= PathNVB && e.set.Int("NCCL_IGNORE_DISABLED_P2P", 0) == 0 {
					return false, inter, "NVML reports P2P disabled between NVLink-connected GPUs: NCCL fails to initialise (set NCCL_IGNORE_DISABLED_P2P=1 to go on without P2P)"
				}
				return false, inter, "NVML reports P2P reads or writes not supported between the GPUs"
			}
		}
	}
	return true, inter, e.text("path %s is within the P2P level %s (%s)", path.typ, level, src)
}

// rawType is the path type between two GPUs before NCCL diverted it, for reasons.
func (e *engine) rawType(g1, g2 *topoNode, t PathType) PathType {
	if e.raw == nil {
		return t
	}
	return path(e.raw.nodes[nodeGPU][g1.idx], nodeGPU, g2.idx).typ
}

// checkNet is ncclTopoCheckNet: the network is preferred over P2P and SHM inside
// the node when both GPUs reach a network device at PXB or closer faster than they
// reach each other, unless NCCL_NET_DISABLE_INTRA=1.
func (e *engine) checkNet(g1, g2 *topoNode) bool {
	e.cite(ruleCheckNet)
	if e.set.Int("NCCL_NET_DISABLE_INTRA", 0) == 1 {
		return false
	}
	if e.netBest == nil {
		e.netBest = make([]float32, len(e.sys.nodes[nodeGPU]))
		for i, g := range e.sys.nodes[nodeGPU] {
			for n := range e.sys.nodes[nodeNET] {
				if p := path(g, nodeNET, n); p.typ <= PathPXB && p.bw > e.netBest[i] {
					e.netBest[i] = p.bw
				}
			}
		}
	}
	speed := path(g1, nodeGPU, g2.idx).bw
	return e.netBest[g1.idx] > speed && e.netBest[g2.idx] > speed
}

func (e *engine) useMemcpy() bool { return e.set.Int("NCCL_P2P_USE_CUDA_MEMCPY", 0) != 0 }

// p2pCanConnect is p2pCanConnect in src/transport/p2p.cc for two ranks on this host.
func (e *engine) p2pCanConnect(g1, g2 *topoNode) (bool, string) {
	e.cite(ruleP2PCanConnect)
	ok, inter, why := e.checkP2P(g1, g2)
	if !ok {
		return false, why
	}
	if inter != nil {
		if e.useMemcpy() {
			return false, "the path goes through another GPU, which NCCL_P2P_USE_CUDA_MEMCPY=1 cannot use"
		}
		return true, why
	}
	if e.checkNet(g1, g2) {
		return false, "both GPUs reach a network device at PXB or closer faster than each other (ncclTopoCheckNet)"
	}
	if !e.nvmlP2P(g1, g2) {
		return false, "CUDA cannot enable peer access (NVML P2P status not OK)"
	}
	return true, why
}

// shmCanConnect is shmCanConnect in src/transport/shm.cc for two ranks on this host
// sharing /dev/shm.
func (e *engine) shmCanConnect(g1, g2 *topoNode) (bool, string) {
	e.cite(ruleSHMCanConnect)
	if e.set.Int("NCCL_SHM_DISABLE", 0) == 1 {
		return false, "NCCL_SHM_DISABLE=1"
	}
	if e.checkNet(g1, g2) {
		return false, "both GPUs reach a network device at PXB or closer faster than each other (ncclTopoCheckNet)"
	}
	e.assume("all ranks share one host and one /dev/shm (one container)")
	return true, "both ranks are on this host and share /dev/shm"
}

// gdrLevel is the farthest path type at which NCCL uses GPUDirect RDMA
// (ncclTopoCheckGdr): NCCL_NET_GDR_LEVEL, else PXB, or from 2.29 P2C while
// NCCL_NET_GDR_C2C is on (it is by default).
func (e *engine) gdrLevel() (PathType, string) {
	if l, ok := e.userLevel("", "NCCL_NET_GDR_LEVEL"); ok {
		return l, "NCCL_NET_GDR_LEVEL=" + l.String()
	}
	if e.ver.AtLeast(2, 29) && e.set.Int("NCCL_NET_GDR_C2C", 1) != 0 {
		return PathP2C, "default from 2.29"
	}
	return PathPXB, "default"
}

// hasNVLPeer reports whether GPU g has another GPU at NVL (ncclTopoCheckGdr, for
// GPUDirect RDMA reads before Ampere), or is the only GPU.
func (e *engine) hasNVLPeer(g *topoNode) bool {
	gpus := e.sys.nodes[nodeGPU]
	if e.nvlPeer == nil {
		e.nvlPeer = make([]int8, len(gpus))
	}
	if e.nvlPeer[g.idx] == 0 {
		e.nvlPeer[g.idx] = -1
		if len(gpus) == 1 {
			e.nvlPeer[g.idx] = 1
		}
		for i, o := range gpus {
			if o != g && path(g, nodeGPU, i).typ == PathNVL {
				e.nvlPeer[g.idx] = 1
				break
			}
		}
	}
	return e.nvlPeer[g.idx] > 0
}

// checkGdr is ncclTopoCheckGdr (src/graph/paths.cc): read is the send side. It
// returns the mode ("Default" or "PCI") or "" when GPUDirect RDMA is off, and why.
func (e *engine) checkGdr(g, net *topoNode, read bool) (string, string) {
	e.cite(ruleCheckGdr)
	if net.netGDR == 0 {
		return "", "the network device does not support GPUDirect RDMA"
	}
	if g.gdr == 0 {
		return "", "the GPU does not support GPUDirect RDMA (cudaDevAttrGPUDirectRDMASupported)"
	}
	if read {
		r := e.set.Int("NCCL_NET_GDR_READ", -2)
		if r == 0 {
			return "", "NCCL_NET_GDR_READ=0 turns GPUDirect RDMA off for sends"
		}
		if r < 0 && g.sm < 80 && !e.hasNVLPeer(g) {
			return "", "sends from GPUs older than Ampere without NVLink peers read through the CPU (NCCL_NET_GDR_READ=1 forces GPUDirect RDMA)"
		}
	}
	level, src := e.gdrLevel()
	dist := path(g, nodeNET, net.idx).typ
	// 2.27 and 2.28 count a C2C-then-PCIe path (P2C) as C2C while
	// NCCL_NET_GDR_C2C is on; 2.29 compares P2C with its P2C level instead.
	c2c := e.set.Int("NCCL_NET_GDR_C2C", 1) != 0 && e.ver.AtLeast(2, 27) && !e.ver.AtLeast(2, 29)
	if dist == PathP2C && c2c {
		dist = PathC2C
	}
	if dist > level {
		return "", e.text("path %s is farther than the GPUDirect RDMA level %s (%s)", dist, level, src)
	}
	mode := "Default"
	direct := PathC2C
	if e.ver.AtLeast(2, 29) {
		direct = PathP2C
	}
	if c := e.sys.localCPUIndex(g); c >= 0 && path(g, nodeCPU, c).typ == PathC2C && dist != direct {
		mode = "PCI"
	}
	return mode, e.text("path %s is within the GPUDirect RDMA level %s (%s)", dist, level, src)
}

// computePaths is ncclTopoComputePaths (src/graph/paths.cc) for a communicator of
// one rank per GPU on this host. PXN rerouting through a peer GPU is not modelled.
func (e *engine) computePaths() {
	s := e.sys
	s.computeAll(e.set.Int("NCCL_NVB_DISABLE", 0) != 0)
	gpus := s.nodes[nodeGPU]
	for g, gn := range gpus {
		for _, pn := range gpus {
			if ok, _, _ := e.checkP2P(pn, gn); !ok {
				if c := s.localCPUIndex(gn); c >= 0 {
					s.addInterStep(nodeCPU, c, pn, nodeGPU, g)
				}
			}
		}
		for _, pn := range gpus {
			if pn == gn {
				continue
			}
			if ok, _ := e.p2pCanConnect(pn, gn); ok {
				continue
			}
			if ok, _ := e.shmCanConnect(pn, gn); !ok && pn.paths[nodeGPU] != nil {
				pn.paths[nodeGPU][g].typ = PathNET
			}
		}
	}
	e.c2cNetPaths()
	e.gdrNetPaths()
	e.netBest, e.nvlPeer = nil, nil // the paths changed
}

// c2cNetPaths is the C2C step of ncclTopoComputePaths: a GPU on C2C to its CPU
// reaches the network devices on PCIe from that CPU at P2C.
func (e *engine) c2cNetPaths() {
	s := e.sys
	for n, nn := range s.nodes[nodeNET] {
		for g, gn := range s.nodes[nodeGPU] {
			c := s.localCPUIndex(gn)
			if c < 0 || nn.paths[nodeCPU] == nil || gn.paths[nodeNET] == nil || nn.paths[nodeGPU] == nil {
				continue
			}
			if mergePathType(gn.paths[nodeCPU][c].typ, nn.paths[nodeCPU][c].typ) == PathP2C {
				gn.paths[nodeNET][n].typ = min(PathP2C, gn.paths[nodeNET][n].typ)
				nn.paths[nodeGPU][g].typ = min(PathP2C, nn.paths[nodeGPU][g].typ)
			}
		}
	}
}

// gdrNetPaths is the GPUDirect RDMA step of ncclTopoComputePaths: where a GPU and
// a network device closer than PHB cannot use GPUDirect RDMA, their paths go
// through the GPU's CPU.
func (e *engine) gdrNetPaths() {
	s := e.sys
	for n, nn := range s.nodes[nodeNET] {
		for g, gn := range s.nodes[nodeGPU] {
			if path(gn, nodeNET, n).typ >= PathPHB {
				continue
			}
			if mode, _ := e.checkGdr(gn, nn, false); mode == "" {
				c := s.localCPUIndex(gn)
				if c < 0 {
					continue
				}
				s.addInterStep(nodeCPU, c, nn, nodeGPU, g)
				s.addInterStep(nodeCPU, c, gn, nodeNET, n)
			}
		}
	}
}

// label is the transport as NCCL prints it in its "Channel xx/y : a[d] -> b[d]
// via ..." INFO lines for ranks in different processes (p2pSendSetup in
// src/transport/p2p.cc, shmSendSetup in shm.cc, sendSetup in net.cc).
func (e *engine) label(transport string, g1, g2 *topoNode, inter *topoNode) string {
	switch transport {
	case "P2P":
		return e.p2pLabel(g1, g2, inter)
	case "SHM":
		e.cite(ruleSHMLabel)
		ce := e.set.Int("NCCL_SHM_USE_CUDA_MEMCPY", 0) != 0
		mode := e.set.Int("NCCL_SHM_MEMCPY_MODE", 1)
		side := func(bit int64) string {
			if ce && mode&bit != 0 {
				return "CE"
			}
			return "direct"
		}
		return "SHM/" + side(1) + "/" + side(2)
	}
	e.cite(ruleNetSendLabel)
	if e.facts.NetPlugin != "" {
		return "NET/" + e.facts.NetPlugin
	}
	return "NET"
}

func (e *engine) p2pLabel(g1, g2, inter *topoNode) string {
	e.cite(ruleP2PLabel)
	if inter != nil {
		return "P2P/indirect/" + strconv.Itoa(inter.rank) + "[" + strconv.Itoa(inter.dev) + "]"
	}
	read := path(g1, nodeGPU, g2.idx).typ == PathNVL && g1.sm == 80 && g2.sm == 80
	if r := e.set.Int("NCCL_P2P_READ_ENABLE", -2); r != -2 {
		read = r != 0
	}
	if e.useMemcpy() {
		read = false
	}
	l := "P2P/IPC"
	if e.cuMem() {
		l = "P2P/CUMEM"
	}
	if read {
		l += "/read"
	}
	if e.useMemcpy() {
		l += "/CE"
	}
	return l
}

// cuMem reports whether NCCL allocates with the cuMem API (ncclCuMemEnable in
// src/misc/cudawrap.cc): NCCL_CUMEM_ENABLE, by default on from 2.19 where the
// driver supports it and off before.
func (e *engine) cuMem() bool {
	e.cite(ruleCuMem)
	def := int64(0)
	if e.ver.AtLeast(2, 19) {
		def = -2
	}
	v := e.set.Int("NCCL_CUMEM_ENABLE", def)
	if v == -2 {
		e.assume("the CUDA driver supports the cuMem API (CUDA 12 drivers do)")
		return true
	}
	return v != 0
}
