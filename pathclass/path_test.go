package pathclass

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/pcie"
)

// tree builds pcie devices by hand, linked as pcie.NewTopology links them.
type tree struct{ tb testing.TB }

func (tr tree) host(name string) *pcie.HostBridge { return &pcie.HostBridge{Name: name} }

// fn adds a function at bdf below parent (nil: on h's root bus). id is
// vendor<<16|device, sub subvendor<<16|subdevice; numa is its numa_node (-1 none).
func (tr tree) fn(h *pcie.HostBridge, parent *pcie.Device, bdf string, id, sub uint32, numa int) *pcie.Device {
	tr.tb.Helper()
	a, err := pcie.ParseAddress(bdf)
	if err != nil {
		tr.tb.Fatal(err)
	}
	d := &pcie.Device{
		Record: pcie.Record{Address: a, Vendor: uint16(id >> 16), Device: uint16(id),
			SubVendor: uint16(sub >> 16), SubDevice: uint16(sub), NUMANode: &numa},
		Parent: parent, HostBridge: h,
	}
	if parent == nil {
		h.Devices = append(h.Devices, d)
	} else {
		parent.Children = append(parent.Children, d)
	}
	return d
}

const (
	idRP       = 0x8086352a
	idPLX      = 0x10b59797
	idBCM5     = 0x1000c030
	subBCM5Top = 0x10000100 // subsystem device 0x0xxx: level 0
	subBCM5Sub = 0x10001100 // 0x1xxx: level 1
	idBCM4     = 0x1000c010
	subBCM4    = 0x1000a064
	idGPU      = 0x10de2330
	idNIC      = 0x15b31021
)

// switchPair puts a GPU and a NIC below two downstream ports of one switch whose ports
// are id/sub, below root port 00:01.0 of h.
func (tr tree) switchPair(h *pcie.HostBridge, id, sub uint32) (gpu, nic *pcie.Device) {
	rp := tr.fn(h, nil, "00:01.0", idRP, 0, 0)
	usp := tr.fn(h, rp, "01:00.0", id, sub, 0)
	d0 := tr.fn(h, usp, "02:00.0", id, sub, 0)
	d1 := tr.fn(h, usp, "02:01.0", id, sub, 0)
	return tr.fn(h, d0, "03:00.0", idGPU, 0, 0), tr.fn(h, d1, "04:00.0", idNIC, 0, 0)
}

// twoLevel puts a GPU and a NIC below two sub-switches of one top switch:
// RP / top USP / DSP / sub USP / DSP / device, once on each side.
func (tr tree) twoLevel(h *pcie.HostBridge, id, topSub, subSub uint32) (gpu, nic *pcie.Device) {
	rp := tr.fn(h, nil, "00:01.0", idRP, 0, 0)
	top := tr.fn(h, rp, "01:00.0", id, topSub, 0)
	var ends [2]*pcie.Device
	for i, bus := range []string{"03", "06"} {
		dsp := tr.fn(h, top, "02:0"+string(rune('0'+i))+".0", id, topSub, 0)
		sub := tr.fn(h, dsp, bus+":00.0", id, subSub, 0)
		below := map[string]string{"03": "04", "06": "07"}[bus]
		dsp2 := tr.fn(h, sub, below+":00.0", id, subSub, 0)
		endBus := map[string]string{"03": "05", "06": "08"}[bus]
		ends[i] = tr.fn(h, dsp2, endBus+":00.0", []uint32{idGPU, idNIC}[i], 0, 0)
	}
	return ends[0], ends[1]
}

func TestClasses(t *testing.T) {
	type pair struct{ a, b *pcie.Device }
	tests := []struct {
		name      string
		setup     func(tr tree) pair
		nvlinks   int
		wantNVSMI Result
		wantNCCL  Result
	}{
		{
			name: "self",
			setup: func(tr tree) pair {
				g, _ := tr.switchPair(tr.host("pci0000:00"), idPLX, 0)
				return pair{g, g}
			},
			wantNVSMI: Result{Class: X}, wantNCCL: Result{Class: X},
		},
		{
			name: "NVLink",
			setup: func(tr tree) pair {
				g, n := tr.switchPair(tr.host("pci0000:00"), idPLX, 0)
				return pair{g, n}
			},
			nvlinks:   18,
			wantNVSMI: Result{Class: NV, NVLinks: 18}, wantNCCL: Result{Class: PIX},
		},
		{
			name: "one switch",
			setup: func(tr tree) pair {
				g, n := tr.switchPair(tr.host("pci0000:00"), idPLX, 0)
				return pair{g, n}
			},
			wantNVSMI: Result{Class: PIX}, wantNCCL: Result{Class: PIX},
		},
		{
			name: "nested switches, PLX",
			setup: func(tr tree) pair {
				g, n := tr.twoLevel(tr.host("pci0000:00"), idPLX, 0, 0)
				return pair{g, n}
			},
			wantNVSMI: Result{Class: PXB}, wantNCCL: Result{Class: PXB},
		},
		{
			name: "Broadcom PEX Gen5 two-level switch, folded by NCCL",
			setup: func(tr tree) pair {
				g, n := tr.twoLevel(tr.host("pci0000:00"), idBCM5, subBCM5Top, subBCM5Sub)
				return pair{g, n}
			},
			wantNVSMI: Result{Class: PXB}, wantNCCL: Result{Class: PIX},
		},
		{
			name: "Broadcom PEX Gen4 two-level switch, folded by NCCL",
			setup: func(tr tree) pair {
				g, n := tr.twoLevel(tr.host("pci0000:00"), idBCM4, subBCM4, subBCM4)
				return pair{g, n}
			},
			wantNVSMI: Result{Class: PXB}, wantNCCL: Result{Class: PIX},
		},
		{
			name: "Broadcom PEX Gen5 with a level-0 sub-switch is not folded",
			setup: func(tr tree) pair {
				g, n := tr.twoLevel(tr.host("pci0000:00"), idBCM5, subBCM5Top, subBCM5Top)
				return pair{g, n}
			},
			wantNVSMI: Result{Class: PXB}, wantNCCL: Result{Class: PXB},
		},
		{
			name: "two root ports",
			setup: func(tr tree) pair {
				h := tr.host("pci0000:00")
				rp1 := tr.fn(h, nil, "00:01.0", idRP, 0, 0)
				rp2 := tr.fn(h, nil, "00:02.0", idRP, 0, 0)
				return pair{tr.fn(h, rp1, "01:00.0", idGPU, 0, 0), tr.fn(h, rp2, "02:00.0", idNIC, 0, 0)}
			},
			wantNVSMI: Result{Class: PHB}, wantNCCL: Result{Class: PHB},
		},
		{
			name: "two functions below one root port",
			setup: func(tr tree) pair {
				h := tr.host("pci0000:00")
				rp := tr.fn(h, nil, "00:01.0", idRP, 0, 0)
				return pair{tr.fn(h, rp, "01:00.0", idNIC, 0, 0), tr.fn(h, rp, "01:00.1", idNIC, 0, 0)}
			},
			wantNVSMI: Result{Class: PHB}, wantNCCL: Result{Class: PHB},
		},
		{
			name: "VF and PF below one downstream port",
			setup: func(tr tree) pair {
				_, nic := tr.switchPair(tr.host("pci0000:00"), idPLX, 0)
				vf := tr.fn(nic.HostBridge, nic.Parent, "04:00.2", idNIC+1, 0, 0)
				nic.Parent.Children = nic.Parent.Children[:1] // a VF is not on the bridge's bus list
				vf.Parent, vf.PF = nil, nic
				return pair{vf, nic}
			},
			wantNVSMI: Result{Class: PIX}, wantNCCL: Result{Class: PIX},
		},
		{
			name: "two host bridges, one NUMA node",
			setup: func(tr tree) pair {
				h0, h1 := tr.host("pci0000:00"), tr.host("pci0000:80")
				return pair{tr.fn(h0, nil, "00:01.0", idGPU, 0, 0), tr.fn(h1, nil, "80:01.0", idNIC, 0, 0)}
			},
			wantNVSMI: Result{Class: NODE}, wantNCCL: Result{Class: PHB},
		},
		{
			name: "two NUMA nodes",
			setup: func(tr tree) pair {
				h0, h1 := tr.host("pci0000:00"), tr.host("pci0000:80")
				return pair{tr.fn(h0, nil, "00:01.0", idGPU, 0, 0), tr.fn(h1, nil, "80:01.0", idNIC, 0, 1)}
			},
			wantNVSMI: Result{Class: SYS}, wantNCCL: Result{Class: SYS},
		},
		{
			name: "two host bridges, NUMA node unknown on both",
			setup: func(tr tree) pair {
				h0, h1 := tr.host("pci0000:00"), tr.host("pci0000:80")
				return pair{tr.fn(h0, nil, "00:01.0", idGPU, 0, -1), tr.fn(h1, nil, "80:01.0", idNIC, 0, -1)}
			},
			wantNVSMI: Result{Class: NODE, Note: "numa_node of 0000:00:01.0 and 0000:80:01.0 is unknown (-1); taken as one NUMA node"},
			wantNCCL:  Result{Class: PHB, Note: "numa_node of 0000:00:01.0 and 0000:80:01.0 is unknown (-1); taken as one NUMA node"},
		},
		{
			name: "two host bridges, NUMA node unknown on one",
			setup: func(tr tree) pair {
				h0, h1 := tr.host("pci0000:00"), tr.host("pci0000:80")
				return pair{tr.fn(h0, nil, "00:01.0", idGPU, 0, 1), tr.fn(h1, nil, "80:01.0", idNIC, 0, -1)}
			},
			wantNVSMI: Result{Class: SYS, Note: "numa_node of 0000:80:01.0 is unknown (-1); taken as a different NUMA node from 1"},
			wantNCCL:  Result{Class: SYS, Note: "numa_node of 0000:80:01.0 is unknown (-1); taken as a different NUMA node from 1"},
		},
		{
			name: "switch in an Intel VMD domain ends NCCL's walk",
			setup: func(tr tree) pair {
				h := tr.host("pci10000:00")
				rp := tr.fn(h, nil, "10000:00:01.0", idRP, 0, 0)
				usp := tr.fn(h, rp, "10000:01:00.0", idPLX, 0, 0)
				d0 := tr.fn(h, usp, "10000:02:00.0", idPLX, 0, 0)
				d1 := tr.fn(h, usp, "10000:02:01.0", idPLX, 0, 0)
				return pair{tr.fn(h, d0, "10000:03:00.0", idGPU, 0, 0), tr.fn(h, d1, "10000:04:00.0", idNIC, 0, 0)}
			},
			wantNVSMI: Result{Class: PHB}, wantNCCL: Result{Class: PHB},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.setup(tree{t})
			if diff := cmp.Diff(tt.wantNVSMI, NVSMI(p.a, p.b, tt.nvlinks)); diff != "" {
				t.Errorf("NVSMI (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantNCCL, NCCL(p.a, p.b)); diff != "" {
				t.Errorf("NCCL (-want +got):\n%s", diff)
			}
			// Classes are symmetric.
			if got := NVSMI(p.b, p.a, tt.nvlinks).Class; got != tt.wantNVSMI.Class {
				t.Errorf("NVSMI(b, a) = %v; want %v", got, tt.wantNVSMI.Class)
			}
			if got := NCCL(p.b, p.a).Class; got != tt.wantNCCL.Class {
				t.Errorf("NCCL(b, a) = %v; want %v", got, tt.wantNCCL.Class)
			}
		})
	}
}

// nvmlCapture is the part of nvml.json (written next to the H200 snapshot) used here.
type nvmlCapture struct {
	GPUs []struct {
		Index         int    `json:"index"`
		BusID         string `json:"bus_id"`
		NVLinksActive int    `json:"nvlinks_active"`
	} `json:"gpus"`
	Pairs []struct {
		A, B           int
		CommonAncestor NVMLLevel `json:"common_ancestor"`
	} `json:"pairs"`
}

// TestH200Capture compares with what NVML said on the captured two-H200 VM: both GPUs
// on the root bus of host bridge pci0000:00, common ancestor 30 (HOSTBRIDGE, PHB);
// nvidia-smi topo -m showed NV18 because of their 18 NVLinks.
func TestH200Capture(t *testing.T) {
	topo := testsupport.Topology(t, testsupport.OpenSnapshot(t, "../testdata/h200-2gpu-vm/snapshot.tar.gz"))
	raw, err := os.ReadFile("../testdata/h200-2gpu-vm/nvml.json")
	if err != nil {
		t.Fatal(err)
	}
	var cap nvmlCapture
	if err := json.Unmarshal(raw, &cap); err != nil {
		t.Fatal(err)
	}
	byIndex := map[int]*pcie.Device{}
	for _, g := range cap.GPUs {
		// NVML writes the domain with 8 digits: 00000000:00:06.0.
		a, err := pcie.ParseAddress(g.BusID[4:])
		if err != nil {
			t.Fatal(err)
		}
		d := topo.Device(a)
		if d == nil {
			t.Fatalf("GPU %s not in the snapshot", g.BusID)
		}
		byIndex[g.Index] = d
	}
	if len(cap.Pairs) == 0 {
		t.Fatal("no pairs in nvml.json")
	}
	for _, p := range cap.Pairs {
		want, ok := p.CommonAncestor.Class()
		if !ok {
			t.Fatalf("NVML level %d", p.CommonAncestor)
		}
		a, b := byIndex[p.A], byIndex[p.B]
		got := NVSMI(a, b, 0)
		if got.Class != want {
			t.Errorf("GPU%d-GPU%d: NVSMI = %v; NVML common ancestor %d is %v", p.A, p.B, got, p.CommonAncestor, want)
		}
		if lvl, _ := got.Class.NVMLLevel(); lvl != p.CommonAncestor {
			t.Errorf("GPU%d-GPU%d: level %d; NVML said %d", p.A, p.B, lvl, p.CommonAncestor)
		}
		if got := NVSMI(a, b, cap.GPUs[p.A].NVLinksActive).String(); got != "NV18" {
			t.Errorf("GPU%d-GPU%d with NVLinks: %q; nvidia-smi topo -m showed NV18", p.A, p.B, got)
		}
		if got := NCCL(a, b); got.Class != PHB {
			t.Errorf("GPU%d-GPU%d: NCCL = %v; want PHB", p.A, p.B, got)
		}
	}
}
