package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/matrix"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
)

// fixtureMatrix builds the matrix of the named fixture; nvlinks as in matrix.Build.
func fixtureMatrix(t *testing.T, machine string, nvlinks func(a, b *pcie.Device) int) matrix.Model {
	t.Helper()
	n := testnode.Load(t, machine, node.Options{NoNames: true})
	return matrix.Build(n.Topology.Devices, nvlinks)
}

// nv2 joins every two GPUs by two NVLinks.
func nv2(a, b *pcie.Device) int { return 2 }

// TestMatrixText checks the grid's header, rows and affinities, the device
// legend with interface names, the class legend with or without NV#, the line
// for a machine without devices of interest, and that names and affinities read
// from the machine are escaped.
func TestMatrixText(t *testing.T) {
	hostile := func() matrix.Model {
		hb := &pcie.HostBridge{Name: "pci0000:00"}
		a := &pcie.Device{Record: pcie.Record{Address: pcie.Address{Bus: 1}, NetDevs: []string{"eth\x1b[2J0"}}, HostBridge: hb}
		b := &pcie.Device{Record: pcie.Record{Address: pcie.Address{Bus: 2}}, HostBridge: hb}
		return matrix.Model{
			Entries:      []matrix.Entry{{Label: "NIC0", Role: matrix.NIC, Device: a}, {Label: "NVME10", Role: matrix.NVMe, Device: b}},
			Grid:         2,
			CPUAffinity:  []string{"0-3\r", "N/A"},
			NUMAAffinity: []string{"0", "N/A"},
		}
	}()
	dgxHeader := "      GPU0  NIC0  GPU1  NIC1  NVME0 GPU2  NIC2  GPU3  NIC3  GPU4  NIC4  GPU5  NIC5  NVME1 GPU6  NIC6  GPU7  NIC7  CPU Affinity   NUMA Affinity"
	tests := []struct {
		name    string
		m       matrix.Model
		want    []string // lines the text holds, in this order
		notWant []string // prefixes no line may start with
	}{
		{
			name: "NVLink known", m: fixtureMatrix(t, "dgx-h100", nv2),
			want: []string{
				dgxHeader,
				"GPU0  X     PIX   NV2   PXB   PXB   NV2   NODE  NV2   NODE  NV2   SYS   NV2   SYS   SYS   NV2   SYS   NV2   SYS   0-111          0",
				"NIC0  PIX   X     PXB   PXB   PXB   NODE  NODE  NODE  NODE  SYS   SYS   SYS   SYS   SYS   SYS   SYS   SYS   SYS   0-111          0",
				"NIC7  SYS   SYS   SYS   SYS   SYS   SYS   SYS   SYS   SYS   NODE  NODE  NODE  NODE  NODE  PXB   PXB   PIX   X     112-223        1",
				"Devices:",
				"  NIC0:  0000:1b:00.0 [15b3:1021] Class 0207: Device 15b3:1021 (ibp0, mlx5_0)",
				"  NVME1: 0000:a5:00.0 [144d:a824] Class 0108: Device 144d:a824 (nvme1)",
				"Legend:",
				"  PIX  = Connection traversing at most a single PCIe bridge",
				"  NV#  = Connection traversing a bonded set of # NVLinks",
			},
			notWant: []string{"  (NVLink not queried"},
		},
		{
			name: "NVLink not queried", m: fixtureMatrix(t, "dgx-h100", nil),
			want: []string{
				dgxHeader,
				"GPU0  X     PIX   PXB   PXB   PXB   NODE  NODE  NODE  NODE  SYS   SYS   SYS   SYS   SYS   SYS   SYS   SYS   SYS   0-111          0",
				"  PIX  = Connection traversing at most a single PCIe bridge",
				"  (NVLink not queried: NVML unavailable or --no-nvml)",
			},
			notWant: []string{"  NV#"},
		},
		{
			name: "no devices of interest", m: matrix.Model{},
			want:    []string{"no GPUs, NICs, NVMe controllers or p2pmem providers found", ""},
			notWant: []string{"Legend", "Devices"},
		},
		{
			name: "long label, hostile names", m: hostile,
			want: []string{
				"       NIC0   NVME10 CPU Affinity   NUMA Affinity",
				"NIC0   X      PHB    " + Escape("0-3\r") + strings.Repeat(" ", 15-len(Escape("0-3\r"))) + "0",
				"NVME10 PHB    X      N/A            N/A",
				"  NIC0:   0000:01:00.0 " + deviceTitle(hostile.Entries[0].Device) + " (" + Escape("eth\x1b[2J0") + ")",
				"  NVME10: 0000:02:00.0 " + deviceTitle(hostile.Entries[1].Device),
				"  (NVLink not queried: NVML unavailable or --no-nvml)",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var plain, color bytes.Buffer
			if err := MatrixText(&plain, tt.m, Style{}); err != nil {
				t.Fatal(err)
			}
			missing, unwanted := missingLines(plain.String(), tt.want, tt.notWant)
			if len(missing) > 0 || len(unwanted) > 0 {
				t.Errorf("missing (in order) %q\nunwanted %q\nin:\n%s", missing, unwanted, plain.String())
			}
			if err := MatrixText(&color, tt.m, Style{Color: true}); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(plain.String(), "\x1b") || (len(tt.m.Entries) > 0 && !strings.Contains(color.String(), "\x1b[")) {
				t.Errorf("escape sequences: want them in the colored grid only")
			}
		})
	}
}

// TestMatrixJSON checks the devices MatrixJSON writes: label, role, address,
// class, affinities and the row of the grid, and whether NVLink was queried.
func TestMatrixJSON(t *testing.T) {
	type dev struct {
		Label        string   `json:"label"`
		Role         string   `json:"role"`
		Address      string   `json:"address"`
		Class        string   `json:"class"`
		CPUAffinity  string   `json:"cpu_affinity"`
		NUMAAffinity string   `json:"numa_affinity"`
		Links        []string `json:"links"`
	}
	type doc struct {
		SchemaVersion string `json:"schema_version"`
		Devices       []dev  `json:"devices"`
		NVLink        bool   `json:"nvlink_queried"`
	}
	tests := []struct {
		name  string
		m     matrix.Model
		first []dev // the first devices
		count int   // of how many
		nv    bool
	}{
		{"NVLink known", fixtureMatrix(t, "dgx-h100", nv2), []dev{
			{"GPU0", "gpu", "0000:1a:00.0", "030200", "0-111", "0", strings.Fields("X PIX NV2 PXB PXB NV2 NODE NV2 NODE NV2 SYS NV2 SYS SYS NV2 SYS NV2 SYS")},
			{"NIC0", "nic", "0000:1b:00.0", "020700", "0-111", "0", strings.Fields("PIX X PXB PXB PXB NODE NODE NODE NODE SYS SYS SYS SYS SYS SYS SYS SYS SYS")},
		}, 18, true},
		{"NVLink not queried", fixtureMatrix(t, "dgx-h100", nil), []dev{
			{"GPU0", "gpu", "0000:1a:00.0", "030200", "0-111", "0", strings.Fields("X PIX PXB PXB PXB NODE NODE NODE NODE SYS SYS SYS SYS SYS SYS SYS SYS SYS")},
		}, 18, false},
		{"no devices of interest", matrix.Model{}, []dev{}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := MatrixJSON(&b, tt.m); err != nil {
				t.Fatal(err)
			}
			var got doc
			if err := json.Unmarshal(b.Bytes(), &got); err != nil {
				t.Fatalf("%v in\n%s", err, b.Bytes())
			}
			if got.SchemaVersion != MatrixSchemaVersion || got.NVLink != tt.nv || got.Devices == nil || len(got.Devices) != tt.count {
				t.Fatalf("schema_version %q, nvlink_queried %t, %d devices (null: %t); want %q, %t, %d", got.SchemaVersion, got.NVLink, len(got.Devices), got.Devices == nil, MatrixSchemaVersion, tt.nv, tt.count)
			}
			if diff := cmp.Diff(tt.first, got.Devices[:len(tt.first)]); diff != "" {
				t.Errorf("devices (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMatrixCapped: with more devices than matrix.MaxGrid, text and JSON give the
// grid of the first MaxGrid and count every pair by class; the output grows
// linearly with the devices (a full grid of 8,000 GPUs was 513 MB).
func TestMatrixCapped(t *testing.T) {
	const n = 3000
	var recs []pcie.Record
	for i := range n {
		a := pcie.Address{Bus: uint8(i >> 8), Device: uint8(i>>3) & 0x1f, Function: uint8(i & 7)}
		hb := "pci0000:00"
		if i%2 == 1 {
			hb = "pci0000:80" // another root complex, with no NUMA node known
		}
		recs = append(recs, pcie.Record{Address: a, Path: hb + "/" + a.String(), Vendor: 0x10de, Device: 0x2335, Class: 0x030200})
	}
	m := matrix.Build(pcie.NewTopology(recs).Devices, nil)
	var text, js bytes.Buffer
	if err := MatrixText(&text, m, Style{}); err != nil {
		t.Fatal(err)
	}
	half := n / 2 * (n/2 - 1) / 2
	want := fmt.Sprintf("The grid shows the first %d of %d devices; all %d pairs by class: PHB %d, NODE %d.",
		matrix.MaxGrid, n, n*(n-1)/2, 2*half, n*(n-1)/2-2*half)
	if !strings.Contains(text.String(), want) {
		t.Errorf("text lacks %q", want)
	}
	if hdr, _, _ := strings.Cut(text.String(), "\n"); !strings.Contains(hdr, "GPU127 ") || strings.Contains(hdr, "GPU128") {
		t.Errorf("header does not end at GPU127: %.200q...", hdr)
	}
	if err := MatrixJSON(&js, m); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Devices []struct {
			Links []string `json:"links"`
		} `json:"devices"`
		Grid  int            `json:"grid_devices"`
		Pairs map[string]int `json:"pairs"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Grid != matrix.MaxGrid || len(doc.Devices) != n || len(doc.Devices[0].Links) != matrix.MaxGrid || len(doc.Devices[n-1].Links) != 0 {
		t.Errorf("grid_devices %d, %d devices, links %d and %d long", doc.Grid, len(doc.Devices), len(doc.Devices[0].Links), len(doc.Devices[n-1].Links))
	}
	if diff := cmp.Diff(map[string]int{"PHB": 2 * half, "NODE": n*(n-1)/2 - 2*half}, doc.Pairs); diff != "" {
		t.Errorf("pairs (-want +got):\n%s", diff)
	}
	// The grid's rows and one legend line per device.
	for name, b := range map[string]int{"text": text.Len(), "json": js.Len()} {
		if limit := matrix.MaxGrid*(matrix.MaxGrid+4)*7 + n*300; b > limit {
			t.Errorf("%s: %d bytes for %d devices, want at most %d", name, b, n, limit)
		}
	}
}
