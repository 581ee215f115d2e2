package matrix_test

import (
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/matrix"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
)

func load(t *testing.T, name string) *pcie.Topology {
	t.Helper()
	return testnode.Load(t, name, node.Options{NoNames: true, NoPlatform: true}).Topology
}

// row is one entry of a Model, flattened for comparison.
type row struct {
	Label, Role, Address, CPU, NUMA string
	Cells                           []string
}

func rows(m matrix.Model) []row {
	var out []row
	for i, e := range m.Entries {
		var cells []string
		for j := range m.Grid {
			cells = append(cells, m.Cell(i, j))
		}
		out = append(out, row{e.Label, e.Role.String(), e.Device.Address.String(), m.CPUAffinity[i], m.NUMAAffinity[i], cells})
	}
	return out
}

func TestBuild(t *testing.T) {
	tests := []struct {
		machine string
		nvlinks func(a, b *pcie.Device) int
		want    []row
	}{
		// Labels follow address order; GPUs on other root complexes of the same
		// socket are NODE, on the other socket SYS.
		{"amd-epyc", nil, []row{
			{"GPU0", "gpu", "0000:01:00.0", "0-95", "0", []string{"X", "PHB", "NODE", "SYS", "SYS"}},
			{"NIC0", "nic", "0000:02:00.0", "0-95", "0", []string{"PHB", "X", "NODE", "SYS", "SYS"}},
			{"GPU1", "gpu", "0000:41:00.0", "0-95", "0", []string{"NODE", "NODE", "X", "SYS", "SYS"}},
			{"GPU2", "gpu", "0000:81:00.0", "96-191", "1", []string{"SYS", "SYS", "SYS", "X", "NODE"}},
			{"GPU3", "gpu", "0000:c1:00.0", "96-191", "1", []string{"SYS", "SYS", "SYS", "NODE", "X"}},
		}},
		// NVLink counts apply to GPU pairs only.
		{"amd-epyc", func(a, b *pcie.Device) int { return 18 }, []row{
			{"GPU0", "gpu", "0000:01:00.0", "0-95", "0", []string{"X", "PHB", "NV18", "NV18", "NV18"}},
			{"NIC0", "nic", "0000:02:00.0", "0-95", "0", []string{"PHB", "X", "NODE", "SYS", "SYS"}},
			{"GPU1", "gpu", "0000:41:00.0", "0-95", "0", []string{"NV18", "NODE", "X", "NV18", "NV18"}},
			{"GPU2", "gpu", "0000:81:00.0", "96-191", "1", []string{"NV18", "SYS", "NV18", "X", "NV18"}},
			{"GPU3", "gpu", "0000:c1:00.0", "96-191", "1", []string{"NV18", "SYS", "NV18", "NV18", "X"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.machine, func(t *testing.T) {
			m := matrix.Build(load(t, tt.machine).Devices, tt.nvlinks)
			if diff := cmp.Diff(tt.want, rows(m)); diff != "" {
				t.Errorf("Build (-want +got):\n%s", diff)
			}
			// The counts are those of the grid's cells above the diagonal.
			want := map[string]int{}
			for i := range m.Grid {
				for j := i + 1; j < m.Grid; j++ {
					want[m.Cell(i, j)]++
				}
			}
			if diff := cmp.Diff(want, m.Pairs); diff != "" {
				t.Errorf("Pairs (-cells +got):\n%s", diff)
			}
		})
	}
}

func TestLabelAndFind(t *testing.T) {
	// The 16 VFs of the SR-IOV NIC are not devices of interest; its two PFs are.
	top := load(t, "sriov-nic")
	entries := matrix.Label(top.Devices)
	var got []string
	for _, e := range entries {
		got = append(got, e.Label+" "+e.Device.Address.String())
	}
	if diff := cmp.Diff([]string{"NIC0 0000:01:00.0", "NIC1 0000:01:00.1"}, got); diff != "" {
		t.Errorf("Label (-want +got):\n%s", diff)
	}
	for _, name := range []string{"NIC1", "nic1", "Nic1"} {
		if e, ok := matrix.Find(entries, name); !ok || e.Label != "NIC1" {
			t.Errorf("Find(%q) = %v, %v; want NIC1", name, e.Label, ok)
		}
	}
	if _, ok := matrix.Find(entries, "NIC2"); ok {
		t.Error("Find(NIC2) found a third NIC")
	}
}

func TestRoles(t *testing.T) {
	tests := []struct {
		role           matrix.Role
		prefix, String string
	}{
		{matrix.GPU, "GPU", "gpu"},
		{matrix.NIC, "NIC", "nic"},
		{matrix.NVMe, "NVME", "nvme"},
		{matrix.Accelerator, "ACC", "accelerator"},
		{matrix.P2PMem, "MEM", "p2pmem"},
		{0, "?", "none"},
	}
	for _, tt := range tests {
		if tt.role.Prefix() != tt.prefix || tt.role.String() != tt.String {
			t.Errorf("role %d: Prefix %q String %q, want %q %q", tt.role, tt.role.Prefix(), tt.role.String(), tt.prefix, tt.String)
		}
	}
	vmd := matrix.Label(load(t, "vmd").Devices)
	var got []string
	for _, e := range vmd {
		got = append(got, e.Label+" "+e.Device.Address.String())
	}
	want := []string{"NVME0 0000:01:00.0", "NVME1 10000:e1:00.0", "NVME2 10000:e2:00.0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("vmd labels (-want +got):\n%s", diff)
	}
}

// TestBuildLarge: 20,000 GPUs on one root bus, as a crafted snapshot holds them (an
// n×n grid was 400 million cells). The model keeps memory linear in the devices, the
// grid covers MaxGrid of them, and every pair is counted.
func TestBuildLarge(t *testing.T) {
	const n = 20_000
	recs := make([]pcie.Record, n)
	for i := range recs {
		a := pcie.Address{Bus: uint8(i >> 8), Device: uint8(i>>3) & 0x1f, Function: uint8(i & 7)}
		recs[i] = pcie.Record{Address: a, Path: "pci0000:00/" + a.String(), Vendor: 0x10de, Device: 0x2335, Class: 0x030200}
	}
	top := pcie.NewTopology(recs)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m := matrix.Build(top.Devices, nil)
	runtime.ReadMemStats(&after)
	if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(n*1024); got > limit {
		t.Errorf("Build allocated %d bytes for %d GPUs, want at most %d", got, n, limit)
	}
	if m.Grid != matrix.MaxGrid || len(m.Entries) != n {
		t.Errorf("grid of %d of %d entries, want %d of %d", m.Grid, len(m.Entries), matrix.MaxGrid, n)
	}
	// One root bus, no bridge: every pair goes through the host bridge.
	if diff := cmp.Diff(map[string]int{"PHB": n * (n - 1) / 2}, m.Pairs); diff != "" {
		t.Errorf("Pairs (-want +got):\n%s", diff)
	}
}
