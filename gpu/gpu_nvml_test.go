//go:build cgo && linux

package gpu

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/pcie"
)

// nvmlSnapshot is the shape of testdata/h200-2gpu-vm/nvml.json: what NVML
// said on a real machine.
type nvmlSnapshot struct {
	Driver string `json:"driver"`
	GPUs   []struct {
		Index         int    `json:"index"`
		Name          string `json:"name"`
		BusID         string `json:"bus_id"`
		BAR1Total     uint64 `json:"bar1_total"`
		BAR1Used      uint64 `json:"bar1_used"`
		FBTotal       uint64 `json:"fb_total"`
		NVLinksActive int    `json:"nvlinks_active"`
	} `json:"gpus"`
	Pairs []struct {
		A              int `json:"a"`
		B              int `json:"b"`
		CommonAncestor int `json:"common_ancestor"`
		Read           int `json:"read"`
		Write          int `json:"write"`
		NVLink         int `json:"nvlink"`
		Atomics        int `json:"atomics"`
		Prop           int `json:"prop"`
	} `json:"pairs"`
}

func cBusID(s string) [32]int8 {
	var b [32]int8
	for i := range min(len(s), len(b)-1) {
		b[i] = int8(s[i])
	}
	return b
}

// snapshotNVML returns a mock NVML that answers exactly what the snapshot
// recorded and ERROR_NOT_SUPPORTED for everything else.
func snapshotNVML(t *testing.T, path string) (*mock.Interface, []*mock.Device) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var snap nvmlSnapshot
	if err := json.Unmarshal(raw, &snap); err != nil {
		t.Fatal(err)
	}
	devs := make([]*mock.Device, len(snap.GPUs))
	index := make(map[nvml.Device]int)
	for i, g := range snap.GPUs {
		d := &mock.Device{
			GetUUIDFunc:    func() (string, nvml.Return) { return "", nvml.ERROR_NOT_SUPPORTED },
			GetNameFunc:    func() (string, nvml.Return) { return g.Name, nvml.SUCCESS },
			GetPciInfoFunc: func() (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{BusId: cBusID(g.BusID)}, nvml.SUCCESS },
			GetBAR1MemoryInfoFunc: func() (nvml.BAR1Memory, nvml.Return) {
				return nvml.BAR1Memory{Bar1Total: g.BAR1Total, Bar1Used: g.BAR1Used, Bar1Free: g.BAR1Total - g.BAR1Used}, nvml.SUCCESS
			},
			GetMemoryInfoFunc:      func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: g.FBTotal}, nvml.SUCCESS },
			GetPersistenceModeFunc: func() (nvml.EnableState, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED },
			GetNvLinkStateFunc: func(l int) (nvml.EnableState, nvml.Return) {
				if l < g.NVLinksActive {
					return nvml.FEATURE_ENABLED, nvml.SUCCESS
				}
				return 0, nvml.ERROR_INVALID_ARGUMENT
			},
			// What the H200 VM answered for every link (its NVSwitches are
			// not passed through); nvml.json does not record it.
			GetNvLinkRemotePciInfoFunc: func(int) (nvml.PciInfo, nvml.Return) {
				return nvml.PciInfo{BusId: cBusID("FFFFFFFF:FF:FF.0")}, nvml.SUCCESS
			},
			GetNvLinkRemoteDeviceTypeFunc: func(int) (nvml.IntNvLinkDeviceType, nvml.Return) {
				return nvml.NVLINK_DEVICE_TYPE_SWITCH, nvml.SUCCESS
			},
		}
		devs[i] = d
		index[d] = i
	}
	for i, d := range devs {
		d.GetTopologyCommonAncestorFunc = func(other nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
			for _, p := range snap.Pairs {
				if p.A == i && p.B == index[other] {
					return nvml.GpuTopologyLevel(p.CommonAncestor), nvml.SUCCESS
				}
			}
			return 0, nvml.ERROR_UNKNOWN
		}
		d.GetP2PStatusFunc = func(other nvml.Device, c nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
			for _, p := range snap.Pairs {
				if p.A == i && p.B == index[other] {
					return nvml.GpuP2PStatus([]int{p.Read, p.Write, p.NVLink, p.Atomics, p.Prop}[c]), nvml.SUCCESS
				}
			}
			return 0, nvml.ERROR_UNKNOWN
		}
	}
	lib := &mock.Interface{
		InitFunc:                       func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:                   func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc:             func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		SystemGetDriverVersionFunc:     func() (string, nvml.Return) { return snap.Driver, nvml.SUCCESS },
		SystemGetCudaDriverVersionFunc: func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED },
		SystemGetConfComputeStateFunc: func() (nvml.ConfComputeSystemState, nvml.Return) {
			return nvml.ConfComputeSystemState{}, nvml.ERROR_NOT_SUPPORTED
		},
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) { return devs[i], nvml.SUCCESS },
	}
	return lib, devs
}

func TestProbeSnapshotGolden(t *testing.T) {
	for _, machine := range []string{"h200-2gpu-vm"} {
		t.Run(machine, func(t *testing.T) {
			dir := filepath.Join("testdata", machine)
			lib, devs := snapshotNVML(t, filepath.Join(dir, "nvml.json"))
			f, err := probe(lib, scopeAll)
			if err != nil {
				t.Fatal(err)
			}
			if f.Timing.Total < f.Timing.Init {
				t.Errorf("Timing %+v: total below init", f.Timing)
			}
			f.Timing = Timing{}
			got, err := json.MarshalIndent(f, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			testsupport.Golden(t, filepath.Join(dir, "facts.golden.json"), got)

			// No redundant calls: one ancestor query per unordered pair, five
			// P2P queries per ordered pair, one Init and one Shutdown.
			n := len(devs)
			var ancestors, p2p int
			for _, d := range devs {
				ancestors += len(d.GetTopologyCommonAncestorCalls())
				p2p += len(d.GetP2PStatusCalls())
			}
			calls := map[string]int{
				"init": len(lib.InitCalls()), "shutdown": len(lib.ShutdownCalls()),
				"ancestor": ancestors, "p2p": p2p,
			}
			wantCalls := map[string]int{"init": 1, "shutdown": 1, "ancestor": n * (n - 1) / 2, "p2p": 5 * n * (n - 1)}
			if diff := cmp.Diff(wantCalls, calls); diff != "" {
				t.Errorf("NVML call counts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestProbeLinks checks the matrix's probe: the same addresses and NVLinks as a
// full probe, and no per-pair or per-system queries.
func TestProbeLinks(t *testing.T) {
	lib, devs := snapshotNVML(t, filepath.Join("testdata", "h200-2gpu-vm", "nvml.json"))
	f, err := probe(lib, scopeLinks)
	if err != nil {
		t.Fatal(err)
	}
	full, err := probe(lib, scopeAll)
	if err != nil {
		t.Fatal(err)
	}
	type links struct {
		Address *pcie.Address
		NVLink  *NVLink
	}
	var got, want []links
	for i := range f.GPUs {
		got = append(got, links{f.GPUs[i].Address, f.GPUs[i].NVLink})
		want = append(want, links{full.GPUs[i].Address, full.GPUs[i].NVLink})
	}
	if diff := cmp.Diff(want, got); diff != "" || len(got) == 0 {
		t.Errorf("links probe differs from the full one (-full +links):\n%s", diff)
	}
	if len(f.Pairs) != 0 || f.DriverVersion != "" {
		t.Errorf("links probe asked for more: %d pairs, driver %q", len(f.Pairs), f.DriverVersion)
	}
	// The full probe ran second: every pair query belongs to it.
	n := len(devs)
	var p2p int
	for _, d := range devs {
		p2p += len(d.GetP2PStatusCalls())
	}
	if p2p != 5*n*(n-1) {
		t.Errorf("%d P2P queries, want only the full probe's %d", p2p, 5*n*(n-1))
	}
}

func TestProbeFailures(t *testing.T) {
	ok := func() nvml.Return { return nvml.SUCCESS }
	tests := []struct {
		name    string
		lib     func(t *testing.T) *mock.Interface
		wantErr error // matched with errors.Is; nil means success
		check   func(t *testing.T, f *Facts)
	}{
		{
			// Any call but Init would panic on the mock (nil func), as it
			// would kill the process with the real library.
			name: "no library",
			lib: func(*testing.T) *mock.Interface {
				return &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
			},
			wantErr: ErrNoNVML,
		},
		{
			name: "driver not loaded",
			lib: func(*testing.T) *mock.Interface {
				return &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED }}
			},
			wantErr: ErrNoNVML,
		},
		{
			name: "count fails",
			lib: func(*testing.T) *mock.Interface {
				return &mock.Interface{
					InitFunc: ok, ShutdownFunc: ok,
					DeviceGetCountFunc: func() (int, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST },
				}
			},
			wantErr: nvml.ERROR_GPU_IS_LOST,
		},
		{
			name: "second GPU has no handle",
			lib: func(t *testing.T) *mock.Interface {
				lib, devs := snapshotNVML(t, filepath.Join("testdata", "h200-2gpu-vm", "nvml.json"))
				lib.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
					if i == 1 {
						return nil, nvml.ERROR_GPU_IS_LOST
					}
					return devs[i], nvml.SUCCESS
				}
				return lib
			},
			check: func(t *testing.T, f *Facts) {
				got := map[string]any{
					"gpu1":  f.GPUs[1].Unknown,
					"pairs": []map[string]string{f.Pairs[0].Unknown, f.Pairs[1].Unknown},
					"gpu0":  f.GPUs[0].Address.String(),
				}
				want := map[string]any{
					"gpu1":  map[string]string{"handle": "ERROR_GPU_IS_LOST"},
					"pairs": []map[string]string{{"pair": "no NVML handle for one of the GPUs"}, {"pair": "no NVML handle for one of the GPUs"}},
					"gpu0":  "0000:00:06.0",
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("degraded facts (-want +got):\n%s", diff)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := probe(tt.lib(t), scopeAll)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("probe() error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, f)
		})
	}
}

func TestBusID(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
		hidden   bool
	}{
		{"00000000:00:06.0", "0000:00:06.0", false, false},
		{"00000000:3B:00.0", "0000:3b:00.0", false, false},
		{"00000001:C1:1F.7", "0001:c1:1f.7", false, false},
		{"", "", true, false},
		{"GPU-1234", "", true, false},
		{"FFFFFFFF:FF:FF.0", "", true, true}, // an NVSwitch seen from a VM
	}
	for _, tt := range tests {
		raw := cBusID(tt.in)
		if got := hiddenBusID(raw); got != tt.hidden {
			t.Errorf("hiddenBusID(%q) = %v, want %v", tt.in, got, tt.hidden)
		}
		a, err := busID(raw)
		if (err != nil) != tt.wantErr {
			t.Errorf("busID(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			continue
		}
		if err == nil && a.String() != tt.want {
			t.Errorf("busID(%q) = %s, want %s", tt.in, a, tt.want)
		}
	}
}
