package check

import (
	"slices"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/pcie"
)

// kind names a device's role for messages.
func kind(d *pcie.Device) string {
	switch {
	case d.IsGPU():
		return "GPU"
	case d.IsNIC():
		return "NIC"
	case d.IsNVMe():
		return "NVMe"
	case d.IsAccelerator():
		return "accelerator"
	case d.P2PMem != nil:
		return "p2pmem"
	}
	return "device"
}

// label names a device for people: "GPU 0000:19:00.0 (ibp0)".
func label(d *pcie.Device) string {
	s := kind(d) + " " + d.Address.String()
	var names []string
	names = append(names, d.NetDevs...)
	names = append(names, d.RDMADevs...)
	names = append(names, d.NVMeDevs...)
	if len(names) > 0 {
		s += " (" + names[0] + ")"
	}
	return s
}

// peermem reports whether a peer-memory client for NVIDIA GPUs is loaded:
// nvidia_peermem or nv_peer_mem, or an nv_mem* entry in memory_peers.
func (f *Facts) peermem() bool { return f.Node.Platform.PeermemLoaded() }

// nvmlGPU returns NVML's view of the GPU at a, or nil.
func (f *Facts) nvmlGPU(a pcie.Address) *gpu.GPU {
	f.nvmlOnce.Do(f.indexNVML)
	return f.nvmlByAddr[a]
}

// indexNVML indexes NVML's GPUs by address (the first of an address wins) and the
// GPU pairs whose P2P status says NVLink works, so that the checks asking about
// every GPU or pair of GPUs do not search NVML's lists each time.
func (f *Facts) indexNVML() {
	f.nvmlByAddr = map[pcie.Address]*gpu.GPU{}
	f.nvlinkOK = map[[2]int]bool{}
	if f.Node.GPU == nil {
		return
	}
	for i := range f.Node.GPU.GPUs {
		if g := &f.Node.GPU.GPUs[i]; g.Address != nil && f.nvmlByAddr[*g.Address] == nil {
			f.nvmlByAddr[*g.Address] = g
		}
	}
	for _, p := range f.Node.GPU.Pairs {
		if p.P2P.NVLink != nil && *p.P2P.NVLink == gpu.P2POK {
			f.nvlinkOK[[2]int{p.A, p.B}] = true
		}
	}
}

// noNVML is the skip reason of a check that needs NVML.
func (f *Facts) noNVML() string {
	if f.NoNVML != "" {
		return f.NoNVML
	}
	return "NVML not available"
}

const noPairs = "fewer than two GPUs, NICs or NVMe controllers: no peer-to-peer pair to judge"

// deviceBlocks returns the capabilities a problem on a device of interest
// stands in the way of, by its role.
func deviceBlocks(d *pcie.Device) []Capability {
	switch {
	case d.IsNVMe() || d.P2PMem != nil:
		return []Capability{CapNVMeP2P}
	case d.IsGPU() || d.IsAccelerator():
		return []Capability{CapP2P, CapGDR}
	case isRDMANIC(d):
		return []Capability{CapGDR}
	}
	return nil
}

// addBlocks adds capabilities to r.Blocks once each, in [Capabilities] order.
func (r *Result) addBlocks(cs ...Capability) {
	have := appendNew(r.Blocks, cs...)
	r.Blocks = r.Blocks[:0:0]
	for _, c := range capabilities {
		if slices.Contains(have, c) {
			r.Blocks = append(r.Blocks, c)
		}
	}
}

func pairSubject(p pair) string { return p.a.Address.String() + "<->" + p.b.Address.String() }

// addrList joins addresses with ", ".
func addrList(addrs []pcie.Address) string { return addrListSep(addrs, ", ") }

// addrListSep joins addresses with sep.
func addrListSep(addrs []pcie.Address, sep string) string {
	names := make([]string, len(addrs))
	for i, a := range addrs {
		names[i] = a.String()
	}
	return strings.Join(names, sep)
}

// seeConfig says how to read a fact of extended configuration space (what)
// that this run could not read.
func (f *Facts) seeConfig(what string) string {
	if f.PrivilegeKnown && !f.Privileged {
		return "run p2pcheck as root (CAP_SYS_ADMIN) to read " + what + " past config space offset 64 (/sys/bus/pci/devices/<bdf>/config)"
	}
	return "read /sys/bus/pci/devices/<bdf>/config of the functions named in the warnings as root (CAP_SYS_ADMIN): " + what + " is in extended config space"
}

// numaString is a device's NUMA node, "?" when unknown or -1.
func numaString(d *pcie.Device) string {
	if d.NUMANode == nil || *d.NUMANode < 0 {
		return "?"
	}
	return strconv.Itoa(*d.NUMANode)
}

// unreadable says why configuration space facts are missing: the reader was
// not root, or (as root) some functions' config could not be read or decoded.
func (f *Facts) unreadable() string {
	if f.PrivilegeKnown && !f.Privileged {
		return "extended config space is unreadable without root"
	}
	return "some functions' config space could not be read or decoded"
}

// appendNew appends each of vs to s that s does not hold yet, in order.
func appendNew[T comparable](s []T, vs ...T) []T {
	for _, v := range vs {
		if !slices.Contains(s, v) {
			s = append(s, v)
		}
	}
	return s
}

func sortedKeys[V any](m map[pcie.Address]V) []pcie.Address {
	out := make([]pcie.Address, 0, len(m))
	for a := range m {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b pcie.Address) int { return a.Compare(b) })
	return out
}
