package rdmatopo_test

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/rdmatopo"
)

// The files of testdata are what rdma-core's rdma_topo (kernel-boot/rdma_topo at
// 691953d8d) dumped of fixture machines, with the temporary root's path removed
// from each realpath:
//
//	mkfixture -o /tmp/r NAME
//	RDMA_TOPO_DEVDIR=/tmp/r/sys/bus/pci/devices/ rdma_topo dump | sed 's#/tmp/r/sys/devices/#/sys/devices/#'

// summary is what a function's record says that a dump carries.
type summary struct {
	Path           string
	Vendor, Device uint16
	Class          uint32
	ACS            uint16
	Group, NUMA    int
	VPD            bool
}

func summarize(t *pcie.Topology, skip func(*pcie.Device) bool) map[string]summary {
	out := map[string]summary{}
	for _, d := range t.Devices {
		if skip(d) {
			continue
		}
		s := summary{Path: d.Path, Vendor: d.Vendor, Device: d.Device, Class: d.Class, Group: -1, NUMA: -2,
			VPD: len(d.Record.VPD) > 0}
		if acs, _ := d.ACS(); acs != nil {
			s.ACS = acs.Control
		}
		if d.IOMMUGroup != nil {
			s.Group = *d.IOMMUGroup
		}
		if d.NUMANode != nil {
			s.NUMA = *d.NUMANode
		}
		out[d.Address.String()] = s
	}
	return out
}

// rdmaTopoSkips are the classes rdma_topo's dump leaves out (its dump_ignored).
func rdmaTopoSkips(d *pcie.Device) bool {
	switch d.Class {
	case 0x060000, 0x060100, 0x080700, 0x088000, 0x110100, 0x130000:
		return true
	}
	return false
}

// TestDumpsOfFixtures: a dump read through node.Load gives the tree, ACS, IOMMU
// groups, NUMA nodes and VPD of the machine it was taken from. A dump records no
// driver, and p2pcheck believes net and RDMA devices only below a function with one
// (they are the driver's), so those are not compared.
func TestDumpsOfFixtures(t *testing.T) {
	for _, name := range []string{"gb300-data-direct", "hgx-inline-ats", "gb200-numa"} {
		t.Run(name, func(t *testing.T) {
			want := summarize(testnode.Load(t, name, node.Options{NoNames: true}).Topology, rdmaTopoSkips)
			root, err := rdmatopo.Open("testdata/" + name + ".json")
			if err != nil {
				t.Fatal(err)
			}
			n, err := node.Load(root, node.Options{NoNames: true})
			if err != nil {
				t.Fatal(err)
			}
			got := summarize(n.Topology, func(*pcie.Device) bool { return false })
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("functions (-fixture +dump):\n%s", diff)
			}
			if len(n.Topology.Errors) > 0 {
				t.Errorf("errors: %v", n.Topology.Errors)
			}
		})
	}
}

func pack(b []byte) string {
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	w.Write(b)
	w.Close()
	return base64.StdEncoding.EncodeToString(z.Bytes())
}

func item(realpath, config string, extra string) string {
	return fmt.Sprintf(`{"realpath": %q, "config": %q, "modalias": "pci:v000010DEd00002941sv0sd0bc03sc02i00"%s}`, realpath, config, extra)
}

// TestHostileDumps: what is not an rdma_topo dump, or names files outside the tree,
// or decompresses past the limits, is refused with an error, never followed.
func TestHostileDumps(t *testing.T) {
	cfg := pack(make([]byte, 256))
	bomb := pack(make([]byte, 8<<20))
	ok := "/sys/devices/pci0000:00/0000:00:01.0"
	for _, tc := range []struct {
		name, in string
		want     error
	}{
		{"a snapshot", "\x1f\x8b", rdmatopo.ErrNotDump},
		{"an object", `{"realpath": "x"}`, rdmatopo.ErrNotDump},
		{"broken JSON", `[{"realpath": `, rdmatopo.ErrNotDump},
		{"traversal", "[" + item("/sys/devices/pci0000:00/../../../etc/0000:00:01.0", cfg, "") + "]", nil},
		{"not below a host bridge", "[" + item("/sys/devices/0000:00:01.0", cfg, "") + "]", nil},
		{"a bad address", "[" + item("/sys/devices/pci0000:00/../x", cfg, "") + "]", nil},
		{"twice", "[" + item(ok, cfg, "") + "," + item(ok, cfg, "") + "]", nil},
		{"no config", `[{"realpath": "` + ok + `", "modalias": "x"}]`, nil},
		{"a config bomb", "[" + item(ok, bomb, "") + "]", hostfs.ErrBudget},
		{"a vpd bomb", "[" + item(ok, cfg, `, "vpd": "`+bomb+`"`) + "]", hostfs.ErrBudget},
		{"a bad class name", "[" + item(ok, cfg, `, "subsystems": {"net": ["../../x"]}`) + "]", nil},
		{"a negative group", "[" + item(ok, cfg, `, "iommu_group": -3`) + "]", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rdmatopo.Read(strings.NewReader(tc.in))
			if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("error %v, want one wrapping %v", err, tc.want)
			}
		})
	}
	if _, err := rdmatopo.Read(strings.NewReader("[" + item(ok, cfg, `, "iommu_group": 3, "numa_node": 1, "subsystems": {"net": ["ib0"]}`) + "]")); err != nil {
		t.Errorf("a good item: %v", err)
	}
}

// TestSnapshotFlag: p2pcheck's snapshot reader takes a dump too.
func TestSnapshotFlag(t *testing.T) {
	n := testnode.Snapshot(t, "testdata/gb300-data-direct.json", node.Options{NoNames: true})
	if d := n.Topology.Device(testsupport.Addr(t, "0009:03:00.0")); d == nil || d.ProductData() == nil {
		t.Fatalf("the Data Direct function or its VPD is missing: %+v", d)
	}
}

func FuzzRead(f *testing.F) {
	for _, name := range []string{"gb200-numa"} {
		b, err := os.ReadFile("testdata/" + name + ".json")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`[{"realpath": "/sys/devices/pci0000:00/0000:00:01.0", "config": "", "modalias": ""}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		root, err := rdmatopo.Read(bytes.NewReader(b))
		if err != nil {
			return
		}
		if _, err := node.Load(root, node.Options{NoNames: true}); err != nil && !errors.Is(err, hostfs.ErrBudget) {
			t.Logf("load: %v", err)
		}
	})
}
