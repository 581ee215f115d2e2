//go:build cgo && linux

package gpu

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/p2pkit/p2pkit/pcie"
)

// Probe asks NVML about every GPU and every ordered GPU pair. It fails only
// when NVML cannot be initialised (an error wrapping [ErrNoNVML]) or cannot
// count the GPUs; anything else missing is recorded as unknown.
func Probe() (*Facts, error) {
	return probe(nvml.New(), scopeAll)
}

// ProbeLinks asks NVML only for what a topology matrix needs: each GPU's index,
// name, PCI address and NVLinks. It skips the per-pair P2P and topology queries, whose
// number grows with the square of the GPU count.
func ProbeLinks() (*Facts, error) {
	return probe(nvml.New(), scopeLinks)
}

// scope says how much a probe asks.
type scope uint8

const (
	scopeAll   scope = iota // everything Facts holds
	scopeLinks              // PCI addresses and NVLinks
)

// probe is Probe over any NVML implementation, so tests can feed it a mock.
func probe(lib nvml.Interface, sc scope) (*Facts, error) {
	start := time.Now()
	ret := lib.Init()
	initTime := time.Since(start)
	if ret != nvml.SUCCESS {
		// Init failed: no other NVML symbol may be touched now. Return.Error
		// does not need the library.
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
			return nil, fmt.Errorf("%w: libnvidia-ml.so.1 not found", ErrNoNVML)
		}
		return nil, fmt.Errorf("%w: nvmlInit: %w", ErrNoNVML, ret)
	}
	f, err := query(lib, sc)
	if ret := lib.Shutdown(); ret != nvml.SUCCESS && err == nil {
		err = fmt.Errorf("gpu: nvmlShutdown: %w", ret)
	}
	if err != nil {
		return nil, err
	}
	f.Timing = Timing{Init: initTime, Total: time.Since(start)}
	return f, nil
}

// unknown records in *m (allocating it) that field is unknown, and why.
func unknown(m *map[string]string, field string, why fmt.Stringer) {
	if *m == nil {
		*m = make(map[string]string)
	}
	(*m)[field] = why.String()
}

// query runs the queries of the scope between Init and Shutdown.
func query(lib nvml.Interface, sc scope) (*Facts, error) {
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("gpu: nvmlDeviceGetCount: %w", ret)
	}
	f := &Facts{GPUs: make([]GPU, n), Pairs: []Pair{}}
	devs := handles(lib, f)
	if sc == scopeLinks {
		for i, d := range devs {
			if d != nil {
				deviceName(d, &f.GPUs[i])
				pciAddress(d, &f.GPUs[i])
				nvlinks(d, &f.GPUs[i])
			}
		}
		return f, nil
	}
	systemFacts(lib, f)
	queryDevices(f, devs)
	return f, nil
}

// handles returns the handle of every GPU of f; nil where NVML gave none (the GPU
// says why).
func handles(lib nvml.Interface, f *Facts) []nvml.Device {
	devs := make([]nvml.Device, len(f.GPUs))
	for i := range f.GPUs {
		g := &f.GPUs[i]
		g.Index = i
		d, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			unknown(&g.Unknown, "handle", ret)
			continue
		}
		devs[i] = d
	}
	return devs
}

// systemFacts fills the node-wide facts of f: driver and CUDA versions and the
// confidential-computing state.
func systemFacts(lib nvml.Interface, f *Facts) {
	if v, ret := lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		f.DriverVersion = v
	} else {
		unknown(&f.Unknown, "driver_version", ret)
	}
	if v, ret := lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS {
		f.CUDADriverVersion = v
	} else {
		unknown(&f.Unknown, "cuda_driver_version", ret)
	}
	switch cc, ret := lib.SystemGetConfComputeState(); ret {
	case nvml.SUCCESS:
		f.ConfCompute = confCompute(cc)
	case nvml.ERROR_NOT_SUPPORTED:
		f.ConfCompute = &ConfCompute{Supported: false}
	default:
		unknown(&f.Unknown, "conf_compute", ret)
	}
}

// ancestor is the common ancestor NVML gave for a pair of GPUs, or why not.
type ancestor struct {
	lvl *TopologyLevel
	ret nvml.Return
}

// queryDevices fills the per-GPU and per-pair facts of f from devs.
//
// NVML is thread-safe and each query is a round trip into the driver, so the
// per-GPU and per-pair queries run side by side; every goroutine writes only
// its own GPU or pair. The common ancestor is symmetric: ask once per unordered
// pair. P2P status is asked per ordered pair, as nvidia-smi topo -p2p shows it.
func queryDevices(f *Facts, devs []nvml.Device) {
	n := len(devs)
	var wg sync.WaitGroup
	for i, d := range devs {
		if d != nil {
			wg.Go(func() { deviceFacts(d, &f.GPUs[i]) })
		}
	}
	ancestors := make([]ancestor, n*n) // [a*n+b] for a < b
	for a := range n {
		for b := a + 1; b < n; b++ {
			if devs[a] == nil || devs[b] == nil {
				continue
			}
			wg.Go(func() {
				lvl, ret := devs[a].GetTopologyCommonAncestor(devs[b])
				anc := &ancestors[a*n+b]
				anc.ret = ret
				if ret == nvml.SUCCESS {
					l := TopologyLevel(lvl)
					anc.lvl = &l
				}
			})
		}
	}
	f.Pairs = make([]Pair, 0, n*(n-1))
	for a := range n {
		for b := range n {
			if a != b {
				f.Pairs = append(f.Pairs, Pair{A: a, B: b})
			}
		}
	}
	for k := range f.Pairs {
		p := &f.Pairs[k]
		if devs[p.A] != nil && devs[p.B] != nil {
			wg.Go(func() { p2pCaps(devs[p.A], devs[p.B], p) })
		}
	}
	wg.Wait()
	for k := range f.Pairs {
		p := &f.Pairs[k]
		if devs[p.A] == nil || devs[p.B] == nil {
			unknown(&p.Unknown, "pair", reason("no NVML handle for one of the GPUs"))
			continue
		}
		if anc := ancestors[min(p.A, p.B)*n+max(p.A, p.B)]; anc.lvl != nil {
			p.CommonAncestor = anc.lvl
		} else {
			unknown(&p.Unknown, "common_ancestor", anc.ret)
		}
	}
}

// deviceFacts fills g from d, one optional query at a time.
func deviceFacts(d nvml.Device, g *GPU) {
	if v, ret := d.GetUUID(); ret == nvml.SUCCESS {
		g.UUID = v
	} else {
		unknown(&g.Unknown, "uuid", ret)
	}
	deviceName(d, g)
	pciAddress(d, g)
	if bar1, ret := d.GetBAR1MemoryInfo(); ret == nvml.SUCCESS {
		g.BAR1Total, g.BAR1Used = &bar1.Bar1Total, &bar1.Bar1Used
	} else {
		unknown(&g.Unknown, "bar1", ret)
	}
	if mem, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
		g.MemoryTotal = &mem.Total
	} else {
		unknown(&g.Unknown, "memory_total", ret)
	}
	if pm, ret := d.GetPersistenceMode(); ret == nvml.SUCCESS {
		on := pm == nvml.FEATURE_ENABLED
		g.Persistence = &on
	} else {
		unknown(&g.Unknown, "persistence", ret)
	}
	nvlinks(d, g)
}

// pciAddress fills g.Address from the device's PCI bus ID.
func pciAddress(d nvml.Device, g *GPU) {
	pci, ret := d.GetPciInfo()
	if ret != nvml.SUCCESS {
		unknown(&g.Unknown, "bus_id", ret)
		return
	}
	if a, err := busID(pci.BusId); err == nil {
		g.Address = &a
	} else {
		unknown(&g.Unknown, "bus_id", reason(err.Error()))
	}
}

// nvlinks walks every possible link index. Indexes a GPU does not have
// answer NOT_SUPPORTED or INVALID_ARGUMENT, which PCIe-only GPUs answer for
// all of them.
func nvlinks(d nvml.Device, g *GPU) {
	nl := &NVLink{}
	for l := range nvml.NVLINK_MAX_LINKS {
		state, ret := d.GetNvLinkState(l)
		switch ret {
		case nvml.SUCCESS:
		case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_INVALID_ARGUMENT:
			continue
		default:
			unknown(&g.Unknown, "nvlink", ret)
			return
		}
		if state != nvml.FEATURE_ENABLED {
			continue
		}
		nl.Active++
		peer := NVLinkPeer{Link: l}
		if pci, ret := d.GetNvLinkRemotePciInfo(l); ret != nvml.SUCCESS {
			unknown(&g.Unknown, "nvlink_remote", ret)
		} else if hiddenBusID(pci.BusId) {
			// The far end is not on this machine's PCI tree (an NVSwitch
			// seen from a VM): known to be hidden, not unknown.
		} else if a, err := busID(pci.BusId); err != nil {
			unknown(&g.Unknown, "nvlink_remote", reason(err.Error()))
		} else {
			peer.Remote = &a
		}
		if t, ret := d.GetNvLinkRemoteDeviceType(l); ret == nvml.SUCCESS {
			peer.RemoteType = linkDeviceType(t)
		} else {
			unknown(&g.Unknown, "nvlink_remote_type", ret)
		}
		nl.Links = append(nl.Links, peer)
	}
	g.NVLink = nl
}

// p2pCaps fills p.P2P with one query per capability index.
func p2pCaps(a, b nvml.Device, p *Pair) {
	caps := []struct {
		idx   nvml.GpuP2PCapsIndex
		name  string
		field **P2PStatus
	}{
		{nvml.P2P_CAPS_INDEX_READ, "p2p_read", &p.P2P.Read},
		{nvml.P2P_CAPS_INDEX_WRITE, "p2p_write", &p.P2P.Write},
		{nvml.P2P_CAPS_INDEX_NVLINK, "p2p_nvlink", &p.P2P.NVLink},
		{nvml.P2P_CAPS_INDEX_ATOMICS, "p2p_atomics", &p.P2P.Atomics},
		{nvml.P2P_CAPS_INDEX_PROP, "p2p_prop", &p.P2P.Prop},
	}
	for _, c := range caps {
		st, ret := a.GetP2PStatus(b, c.idx)
		if ret != nvml.SUCCESS {
			unknown(&p.Unknown, c.name, ret)
			continue
		}
		s := P2PStatus(st)
		*c.field = &s
	}
}

func confCompute(cc nvml.ConfComputeSystemState) *ConfCompute {
	c := &ConfCompute{
		Supported: true,
		Enabled:   cc.CcFeature == nvml.CC_SYSTEM_FEATURE_ENABLED,
		DevTools:  cc.DevToolsMode == nvml.CC_SYSTEM_DEVTOOLS_MODE_ON,
	}
	switch cc.Environment {
	case nvml.CC_SYSTEM_ENVIRONMENT_UNAVAILABLE:
		c.Environment = "unavailable"
	case nvml.CC_SYSTEM_ENVIRONMENT_SIM:
		c.Environment = "sim"
	case nvml.CC_SYSTEM_ENVIRONMENT_PROD:
		c.Environment = "prod"
	default:
		c.Environment = fmt.Sprintf("environment(%d)", cc.Environment)
	}
	return c
}

func linkDeviceType(t nvml.IntNvLinkDeviceType) string {
	switch t {
	case nvml.NVLINK_DEVICE_TYPE_GPU:
		return "gpu"
	case nvml.NVLINK_DEVICE_TYPE_SWITCH:
		return "switch"
	case nvml.NVLINK_DEVICE_TYPE_IBMNPU:
		return "ibmnpu"
	}
	return "unknown"
}

// hiddenBusID reports NVML's all-ones bus id, "FFFFFFFF:FF:FF.0", which it
// gives for a link partner outside the visible PCI tree: on an H200 VM every
// link ends at an NVSwitch that the guest cannot see.
func hiddenBusID(raw [32]int8) bool {
	return strings.HasPrefix(strings.ToLower(cString(raw)), "ffffffff:ff:ff.")
}

// cString returns the NUL-terminated string in raw.
func cString(raw [32]int8) string {
	b := make([]byte, 0, len(raw))
	for _, c := range raw {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}

// busID parses NVML's NUL-terminated bus id, "00000000:00:06.0" (8-digit
// domain, upper-case hex), into a canonical address.
func busID(raw [32]int8) (pcie.Address, error) {
	a, err := pcie.ParseAddress(strings.ToLower(cString(raw)))
	if err != nil {
		return pcie.Address{}, fmt.Errorf("gpu: NVML bus id: %w", err)
	}
	return a, nil
}

// reason is a plain-text cause for unknown.
type reason string

func (r reason) String() string { return string(r) }

// BuiltIn says whether this build can use NVML (go-nvml needs cgo and Linux).
const BuiltIn = true

// deviceName records the GPU's product name ("NVIDIA H200").
func deviceName(d nvml.Device, g *GPU) {
	if v, ret := d.GetName(); ret == nvml.SUCCESS {
		g.Name = v
	} else {
		unknown(&g.Unknown, "name", ret)
	}
}
