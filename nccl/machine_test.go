package nccl

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
)

const testdata = "../testdata/nccl"

func readLog(t *testing.T, path string) *Log {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := ParseLog(f)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func readXML(t *testing.T, path string) *Node {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := ParseXML(f)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func trimPaths(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = strings.TrimRight(p, " ")
	}
	return out
}

// TestNCCLTopologyPaths reads the topology NCCL itself dumped (NCCL_TOPO_DUMP_FILE)
// and checks that the paths computed from it are, line for line, the path lines the
// same NCCL printed at NCCL_DEBUG=INFO: hop counts, bandwidths and path types.
func TestNCCLTopologyPaths(t *testing.T) {
	for _, tt := range []struct{ name, xml, log string }{
		{"first capture", "h200-1gpu-first/nccl-topo.xml", "h200-1gpu-first/nccl-info.log"},
		{"device run", "h200-1gpu/nccl-topo.xml", "h200-1gpu/nccl-info.log"},
		{"p2pcheck's XML fed back", "h200-1gpu/p2pcheck-topo.xml", "h200-1gpu/nccl-info-topofile.log"},
		{"offline run", "h200-1gpu-offline/nccl-topo.xml", "h200-1gpu-offline/nccl-info-0.log"},
		{"offline run, p2pcheck's XML fed back", "h200-1gpu-offline/p2pcheck-topo.xml", "h200-1gpu-offline/nccl-info-topofile-0.log"},
		{"offline run, two ranks as two hosts", "h200-1gpu-offline/nccl-topo-2rank.xml", "h200-1gpu-offline/nccl-2rank-0.log"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := readLog(t, filepath.Join(testdata, tt.log))
			if len(l.Paths) == 0 {
				t.Fatal("no path lines in the log")
			}
			r, err := Predict(Input{Topology: readXML(t, filepath.Join(testdata, tt.xml)), Version: l.Version})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(l.Paths, trimPaths(r.Paths)); diff != "" {
				t.Errorf("paths (-NCCL +predicted):\n%s", diff)
			}
		})
	}
}

// eth0 is the VM's network interface: virtio-net on 0000:00:03.0, which NCCL
// reports as "network path (name = eth0) /sys/devices/pci0000:00/0000:00:03.0/virtio2
// is not a PCI device (virtio). Attaching to first CPU". A snapshot does not hold
// /sys/class/net, so the tests name it.
var eth0 = []Interface{{Name: "eth0", Subsystem: "virtio"}}

func withoutHostHash(n *Node) *Node {
	c := cloneNode(n)
	c.Walk(func(x *Node) {
		x.Attrs = slicesDeleteKey(x.Attrs, "host_hash")
	})
	return c
}

func slicesDeleteKey(as []Attr, key string) []Attr {
	var out []Attr
	for _, a := range as {
		if a.Key != key {
			out = append(out, a)
		}
	}
	return out
}

func xmlString(t *testing.T, n *Node) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteXML(&b, n); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestH200OneGPU is acceptance 1 in the unit tier, on the machine the device run
// captured: p2pcheck's topology XML from the snapshot equals NCCL's own dump (but
// for host_hash, which NCCL rewrites whenever it loads a file), its predicted paths
// equal NCCL's INFO lines with NCCL's own detection and with p2pcheck's XML, and
// its GPUDirect RDMA decision equals NCCL's.
func TestH200OneGPU(t *testing.T) {
	dir := filepath.Join(testdata, "h200-1gpu")
	n := testnode.Snapshot(t, filepath.Join(dir, "snapshot.tar.gz"), node.Options{NoNames: true})
	m := FromNode(n, eth0)
	in, topo := m.Input(Settings{}, DefaultVersion, "test")
	if diff := cmp.Diff(xmlString(t, withoutHostHash(readXML(t, filepath.Join(dir, "nccl-topo.xml")))), xmlString(t, topo)); diff != "" {
		t.Errorf("topology XML (-NCCL +p2pcheck):\n%s", diff)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "p2pcheck-topo.xml"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(raw), xmlString(t, topo)); diff != "" {
		t.Errorf("topology XML (-written on the device +from its snapshot):\n%s", diff)
	}
	r, err := Predict(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, log := range []string{"nccl-info.log", "nccl-info-topofile.log"} {
		l := readLog(t, filepath.Join(dir, log))
		if diff := cmp.Diff(l.Paths, trimPaths(r.Paths)); diff != "" {
			t.Errorf("%s: paths (-NCCL +predicted):\n%s", log, diff)
		}
		for _, net := range r.Nets {
			got, ok := l.NetGDR[net.Name]
			if !ok {
				t.Errorf("%s: NCCL printed no GPU Direct RDMA line for %s", log, net.Name)
			}
			if want := yesNo(got); net.GDR != want {
				t.Errorf("%s: %s GDR support %s; NCCL said %s", log, net.Name, net.GDR, want)
			}
		}
		for _, gn := range r.GPUNets {
			if nccl := l.NetGDR[r.Nets[gn.Net].Name]; gn.Recv != yesNo(nccl) || gn.Send != yesNo(nccl) {
				t.Errorf("%s: GPU%d-NET/%d GDR recv %s send %s; NCCL enabled %v", log, gn.GPU, gn.Net, gn.Recv, gn.Send, nccl)
			}
		}
		if l.Version != r.version() {
			t.Errorf("%s: NCCL %v, predicted for %v", log, l.Version, r.NCCLVersion)
		}
	}
	if len(r.GPUNets) != 1 {
		t.Errorf("%d GPU-NET pairs; want 1", len(r.GPUNets))
	}
}

func (r *Report) version() Version {
	v, _ := ParseVersion(r.NCCLVersion)
	return v
}

// h200Facts are NVML's facts of the two-H200 VM (testdata/h200-2gpu-vm/nvml.json):
// 18 active NVLinks per GPU whose far ends are outside the VM's PCI tree (the HGX
// board's NVSwitches; nvidia-smi shows NV18), P2P read and write OK.
func h200Facts(t *testing.T) *gpu.Facts {
	t.Helper()
	raw, err := os.ReadFile("../testdata/h200-2gpu-vm/nvml.json")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		GPUs []struct {
			Index  int    `json:"index"`
			BusID  string `json:"bus_id"`
			Active int    `json:"nvlinks_active"`
		} `json:"gpus"`
		Pairs []struct {
			A, B        int
			Read, Write int // NVML's nvmlGpuP2PStatus_t codes, as the capture holds them
		} `json:"pairs"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	f := &gpu.Facts{}
	for _, g := range c.GPUs {
		a, err := pcie.ParseAddress(g.BusID[4:])
		if err != nil {
			t.Fatal(err)
		}
		nv := &gpu.NVLink{Active: g.Active}
		for l := range g.Active {
			nv.Links = append(nv.Links, gpu.NVLinkPeer{Link: l, RemoteType: "switch"})
		}
		f.GPUs = append(f.GPUs, gpu.GPU{Index: g.Index, Address: &a, NVLink: nv})
	}
	for _, p := range c.Pairs {
		r, w := gpu.P2PStatus(p.Read), gpu.P2PStatus(p.Write)
		f.Pairs = append(f.Pairs, gpu.Pair{A: p.A, B: p.B, P2P: gpu.P2PCaps{Read: &r, Write: &w}})
	}
	return f
}

// golden compares got with testdata/nccl/golden/name (see testsupport.Golden).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testsupport.Golden(t, filepath.Join(testdata, "golden", name), got)
}

func marshal(t *testing.T, r *Report) []byte {
	t.Helper()
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// h200TwoGPUSettings are the settings acceptance 2 runs NCCL under, and the
// transport predicted for every channel between the two GPUs.
var h200TwoGPUSettings = []struct {
	name   string
	assume map[string]string
	via    string
}{
	{"default", nil, "P2P/CUMEM"},
	{"p2p-disable", map[string]string{"NCCL_P2P_DISABLE": "1"}, "SHM/direct/direct"},
	{"p2p-level-loc", map[string]string{"NCCL_P2P_LEVEL": "LOC"}, "SHM/direct/direct"},
	{"shm-disable-p2p-disable", map[string]string{"NCCL_SHM_DISABLE": "1", "NCCL_P2P_DISABLE": "1"}, "NET/Socket"},
	{"p2p-use-cuda-memcpy", map[string]string{"NCCL_P2P_USE_CUDA_MEMCPY": "1"}, "P2P/CUMEM/CE"},
}

func h200TwoGPU(t *testing.T, assume map[string]string) *Report {
	t.Helper()
	n := testnode.Snapshot(t, "../testdata/h200-2gpu-vm/snapshot.tar.gz", node.Options{NoNames: true})
	n.GPU = h200Facts(t)
	in, _ := FromNode(n, eth0).Input(ResolveSettings(assume, nil, nil), DefaultVersion, "test")
	r, err := Predict(in)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestH200TwoGPU writes the predictions for the two-H200 VM under the settings of
// acceptance 2 as goldens; scripts/nccl-2gpu.sh checks them against NCCL's own
// channel lines on such a machine.
func TestH200TwoGPU(t *testing.T) {
	for _, tt := range h200TwoGPUSettings {
		t.Run(tt.name, func(t *testing.T) {
			r := h200TwoGPU(t, tt.assume)
			golden(t, "h200-2gpu-"+tt.name+".json", marshal(t, r))
			if len(r.GPUPairs) != 2 {
				t.Fatalf("%d GPU pairs; want 2", len(r.GPUPairs))
			}
			for _, p := range r.GPUPairs {
				if p.Via != tt.via {
					t.Errorf("GPU%d->GPU%d via %s; want %s", p.From, p.To, p.Via, tt.via)
				}
				if p.Path != PathNVL {
					t.Errorf("GPU%d->GPU%d path %s; want NVL (NVLink through the NVSwitches)", p.From, p.To, p.Path)
				}
			}
		})
	}
}

// TestFixtures writes the predictions for synthetic machines as goldens. Their
// review against NCCL's rules is in the comments of each case.
func TestFixtures(t *testing.T) {
	ndr := map[string]int{}
	for i := range 8 {
		ndr["mlx5_"+strconv.Itoa(i)] = 400000
	}
	for _, tt := range []struct {
		machine string
		assume  map[string]string
		rates   map[string]int
		check   func(t *testing.T, r *Report)
	}{
		// HGX H100 without NVML facts (a sysfs tree): gpu0 and gpu1 sit below two
		// Broadcom PEX level-1 switches that NCCL folds into their level-0 switch, so
		// their path is PIX (ncclTopoFlattenBcmSwitches) and P2P over PCIe is used
		// (PIX <= PXB); gpu0 and gpu2 meet only at the CPU (PHB > PXB): SHM. Each GPU
		// shares a level-1 switch with its ConnectX-7 (PIX), nvidia_peermem is
		// loaded: GPUDirect RDMA both ways; nic4 is behind the other socket (SYS):
		// none.
		{"dgx-h100", nil, nil, func(t *testing.T, r *Report) {
			want := map[[2]int]string{{0, 1}: "P2P/CUMEM", {0, 2}: "SHM/direct/direct", {0, 4}: "SHM/direct/direct"}
			for _, p := range r.GPUPairs {
				if w, ok := want[[2]int{p.From, p.To}]; ok && p.otherwise().Via != w {
					t.Errorf("GPU%d->GPU%d via %s; want %s", p.From, p.To, p.Via, w)
				}
			}
			gdr := map[[2]int]string{{0, 0}: "yes", {0, 2}: "no", {0, 4}: "no", {1, 1}: "yes"}
			for _, g := range r.GPUNets {
				if w, ok := gdr[[2]int{g.GPU, g.Net}]; ok && g.Recv != w {
					t.Errorf("GPU%d-NET/%d GDR recv %s; want %s (%s)", g.GPU, g.Net, g.Recv, w, g.Why)
				}
			}
		}},
		// NCCL_NET_GDR_LEVEL=PHB lets GPUDirect RDMA through the CPU of a socket.
		{"dgx-h100", map[string]string{"NCCL_NET_GDR_LEVEL": "PHB"}, nil, func(t *testing.T, r *Report) {
			for _, g := range r.GPUNets {
				if g.GPU == 0 && g.Net == 2 && g.Recv != "yes" {
					t.Errorf("GPU0-NET/2 GDR recv %s with NCCL_NET_GDR_LEVEL=PHB; want yes (%s)", g.Recv, g.Why)
				}
			}
		}},
		// AMD EPYC with more than two GPUs: the default P2P level stays PXB
		// (ncclTopoCheckP2p, 2.23 and later).
		{"amd-epyc", nil, nil, nil},
		// With the NICs' NDR rate known (400 Gb/s, 50 GB/s), GPUs on different
		// sockets (SYS, 22 GB/s between Sapphire Rapids sockets) reach their own
		// NICs (PIX, 48 GB/s) faster than each other: ncclTopoCheckNet sends their
		// traffic over the network, not SHM. Same socket (PHB, 48 GB/s) stays SHM.
		{"dgx-h100", nil, ndr, func(t *testing.T, r *Report) {
			want := map[[2]int]string{{0, 2}: "SHM/direct/direct", {0, 4}: "NET/IB"}
			for _, p := range r.GPUPairs {
				if w, ok := want[[2]int{p.From, p.To}]; ok && p.otherwise().Via != w {
					t.Errorf("GPU%d->GPU%d via %s; want %s (%s)", p.From, p.To, p.Via, w, p.Why)
				}
			}
		}},
	} {
		name := tt.machine
		if tt.rates != nil {
			name += "-ndr"
		}
		for k, v := range tt.assume {
			name += "-" + strings.ToLower(strings.TrimPrefix(k, "NCCL_")) + "-" + strings.ToLower(v)
		}
		t.Run(name, func(t *testing.T) {
			n := testnode.Load(t, tt.machine, node.Options{NoNames: true})
			nm := FromNode(n, nil)
			nm.RDMARates = tt.rates
			in, topo := nm.Input(ResolveSettings(tt.assume, nil, nil), DefaultVersion, "test")
			r, err := Predict(in)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+".json", marshal(t, r))
			golden(t, name+".xml", []byte(xmlString(t, topo)))
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}
}

// TestH200TwoGPULogs is acceptance 2 in the unit tier: NCCL's channel lines, as
// scripts/nccl-2gpu.sh keeps them under testdata/nccl/h200-2gpu/, against the
// prediction for the captured two-H200 VM under the same setting. No such machine
// was lent when this was written: until the logs are committed the test skips.
func TestH200TwoGPULogs(t *testing.T) {
	for _, tt := range h200TwoGPUSettings {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(testdata, "h200-2gpu", "nccl-"+tt.name+".log")
			if _, err := os.Stat(path); err != nil {
				t.Skipf("no NCCL log from a two-GPU machine (%v): run scripts/nccl-2gpu.sh there", err)
			}
			l := readLog(t, path)
			if len(l.Channels) == 0 {
				t.Fatal("no channel lines in the log")
			}
			want := map[[2]int]string{}
			for _, p := range h200TwoGPU(t, tt.assume).GPUPairs {
				want[[2]int{p.From, p.To}] = p.Via
			}
			for _, c := range l.Channels {
				w := want[[2]int{c.From, c.To}]
				if c.Via != w && !strings.HasPrefix(c.Via, w+"/") {
					t.Errorf("%d -> %d: NCCL via %s, predicted %s", c.From, c.To, c.Via, w)
				}
			}
		})
	}
}

// TestVersionDefaults checks the defaults that changed between releases on the
// two-H200 VM seen over PCIe only (PHB between the GPUs): the P2P level
// (ncclTopoCheckP2p: before 2.23 SYS except on Intel, ARM and Zhaoxin; from 2.23
// PXB, or SYS on AMD x86 with at most two GPUs) and cuMem (on by default from 2.19).
func TestVersionDefaults(t *testing.T) {
	n := testnode.Snapshot(t, "../testdata/h200-2gpu-vm/snapshot.tar.gz", node.Options{NoNames: true})
	for _, tt := range []struct {
		vendor  string
		version Version
		via     string
	}{
		{"GenuineIntel", Version{2, 28, 9}, "SHM/direct/direct"},
		{"GenuineIntel", Version{2, 22, 3}, "SHM/direct/direct"},
		{"AuthenticAMD", Version{2, 28, 9}, "P2P/CUMEM"},
		{"AuthenticAMD", Version{2, 22, 3}, "P2P/CUMEM"},
		{"AuthenticAMD", Version{2, 18, 5}, "P2P/IPC"},
		{"HygonGenuine", Version{2, 22, 3}, "P2P/CUMEM"},
		{"HygonGenuine", Version{2, 28, 9}, "SHM/direct/direct"},
	} {
		t.Run(tt.vendor+"-"+tt.version.String(), func(t *testing.T) {
			m := FromNode(n, nil)
			m.CPUVendor = tt.vendor
			in, _ := m.Input(Settings{}, tt.version, "test")
			r, err := Predict(in)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range r.GPUPairs {
				if p.otherwise().Via != tt.via {
					t.Errorf("GPU%d->GPU%d via %s; want %s (%s)", p.From, p.To, p.Via, tt.via, p.Why)
				}
			}
		})
	}
}
