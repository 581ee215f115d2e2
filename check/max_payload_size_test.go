package check_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
)

// TestMaxPayloadSizeCases: a GPU or RDMA NIC link set below what both ends
// support warns, as does a device set above its port; 128 bytes under
// pci=pcie_bus_peer2peer is explained, unless a later pcie_bus_* option wins; an
// RCiEP's registers are decoded and shown but not judged.
func TestMaxPayloadSizeCases(t *testing.T) {
	gpu := func(o ...fixture.Option) []fixture.Option {
		return append([]fixture.Option{fixture.ID(0x10de, 0x2330), fixture.Class(0x030200), fixture.Link(5, 16), fixture.BAR(1, 1<<30, true, true)}, o...)
	}
	nic := func(o ...fixture.Option) []fixture.Option {
		return append([]fixture.Option{fixture.ID(0x15b3, 0x1021), fixture.Class(0x020700), fixture.Link(5, 16), fixture.RDMA("mlx5_0")}, o...)
	}
	for _, tt := range []struct {
		name    string
		cmdline string
		port    []fixture.Option // the root port's options beyond its ID and link
		dev     []fixture.Option // below the root port; nil: none
		rciep   []fixture.Option // on the root bus; nil: none
		want    outcome
		finding check.Status // of the one finding; "" for none
		msg     string       // in that finding
	}{
		{name: "defaults: 256 on both ends", dev: gpu(),
			want: outcome{check.Pass, "1 GPU and RDMA NIC link(s) run the largest Max Payload Size both ends support", ""}},
		{name: "GPU at 128, both support 512", port: []fixture.Option{fixture.MaxPayload(512, 128)}, dev: gpu(fixture.MaxPayload(512, 128)),
			want: outcome{check.Warn, "1 of 1", "Max Payload Size to Auto"}, finding: check.Warn, msg: "runs a Max Payload Size of 128 bytes, both ends support 512"},
		{name: "128 under pcie_bus_peer2peer", cmdline: "ro pci=noaer,pcie_bus_peer2peer", port: []fixture.Option{fixture.MaxPayload(512, 128)}, dev: gpu(fixture.MaxPayload(512, 128)),
			want: outcome{check.Pass, "1 run 128 bytes set on purpose by pci=pcie_bus_peer2peer", ""}, finding: check.Pass, msg: "set on purpose by pci=pcie_bus_peer2peer"},
		{name: "pcie_bus_safe after pcie_bus_peer2peer", cmdline: "pci=pcie_bus_peer2peer pci=pcie_bus_safe", port: []fixture.Option{fixture.MaxPayload(512, 128)}, dev: gpu(fixture.MaxPayload(512, 128)),
			want: outcome{check.Warn, "1 of 1", "pcie_bus_safe"}, finding: check.Warn, msg: "both ends support 512"},
		{name: "GPU above its port", port: []fixture.Option{fixture.MaxPayload(512, 256)}, dev: gpu(fixture.MaxPayload(512, 512)),
			want: outcome{check.Warn, "or above their port's", "Auto"}, finding: check.Warn, msg: "sends up to 512-byte payloads but its port"},
		{name: "RDMA NIC below both ends", port: []fixture.Option{fixture.MaxPayload(1024, 256)}, dev: nic(fixture.MaxPayload(512, 256)),
			want: outcome{check.Warn, "1 of 1", "Auto"}, finding: check.Warn, msg: "NIC runs a Max Payload Size of 256 bytes, both ends support 512"},
		{name: "port supports less than the GPU", port: []fixture.Option{fixture.MaxPayload(256, 256)}, dev: gpu(fixture.MaxPayload(512, 256)),
			want: outcome{check.Pass, "run the largest", ""}},
		{name: "NVMe only", dev: []fixture.Option{fixture.ID(0x144d, 0xa824), fixture.Class(0x010802), fixture.Link(4, 4)},
			want: outcome{check.Skip, "no GPU or RDMA NIC on a peer path", ""}},
		{name: "RCiEP GPU: decoded, not judged", rciep: gpu(fixture.MaxPayload(512, 128)),
			want: outcome{check.Skip, "no GPU or RDMA NIC link with a port above it", ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := fixture.New().CPU("GenuineIntel", 6, 143, "Intel(R) Xeon(R)").CPUs(8).Kernel("6.8.0")
			if tt.cmdline != "" {
				m.Cmdline(tt.cmdline)
			}
			hb := m.HostBridge(0, 0, 0)
			hb.Endpoint(0, 0, fixture.ID(0x8086, 0x09a2), fixture.Class(0x088000))
			if tt.rciep != nil {
				hb.Endpoint(2, 0, tt.rciep...)
			}
			rp := hb.RootPort(1, 0, append([]fixture.Option{fixture.ID(0x8086, 0x352a), fixture.Link(5, 16)}, tt.port...)...)
			if tt.dev != nil {
				rp.Endpoint(tt.dev...)
			}
			r := run1(t, check.NewFacts(testnode.Machine(t, m, node.Options{NoNames: true}), check.Inputs{}), "max_payload_size")
			compare(t, tt.want, r)
			switch {
			case tt.finding == "" && len(r.Findings) > 0:
				t.Errorf("findings %+v, want none", r.Findings)
			case tt.finding != "" && (len(r.Findings) != 1 || r.Findings[0].Status != tt.finding || !strings.Contains(r.Findings[0].Message, tt.msg)):
				t.Errorf("findings %+v, want one %s saying %q", r.Findings, tt.finding, tt.msg)
			}
			if tt.rciep != nil && (len(r.Evidence) != 1 || !strings.Contains(r.Evidence[0].Value, "GPU DevCtl 128 of DevCap 512 bytes; no link")) {
				t.Errorf("evidence %+v, want the RCiEP's registers, not judged", r.Evidence)
			}
		})
	}
}

// TestMaxPayloadSizeUnknown: a GPU whose config space was not read is unknown
// and says how to read it.
func TestMaxPayloadSizeUnknown(t *testing.T) {
	gpu1 := addr("0000:04:00.0")
	n := withRecords(loadMachine(t, "degraded-link"), func(r *pcie.Record) {
		if r.Address == gpu1 {
			r.Config = nil
		}
	})
	r := run1(t, check.NewFacts(n, check.Inputs{}), "max_payload_size")
	if r.Status != check.Unknown || !slices.Contains(r.Subjects, gpu1.String()) || len(r.Remediation) == 0 || !strings.Contains(r.Remediation[0], "as root") {
		t.Errorf("max_payload_size = %s %v %q, want unknown on %s saying to run as root", r.Status, r.Subjects, r.Remediation, gpu1)
	}
}
