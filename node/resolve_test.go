package node_test

import (
	"errors"
	"testing"

	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/testnode"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
)

func load(t *testing.T, name string) *node.Node {
	t.Helper()
	return testnode.Load(t, name, node.Options{NoNames: true, NoPlatform: true})
}

func TestResolve(t *testing.T) {
	tests := []struct {
		machine, name string
		want          string // address, or "" for an error
		err           error
	}{
		{"amd-epyc", "0000:41:00.0", "0000:41:00.0", nil},
		{"amd-epyc", "41:00.0", "0000:41:00.0", nil},
		{"amd-epyc", "gpu1", "0000:41:00.0", nil},
		{"amd-epyc", "GPU3", "0000:c1:00.0", nil},
		{"amd-epyc", "NIC0", "0000:02:00.0", nil},
		{"amd-epyc", "nic0", "0000:02:00.0", nil},
		{"amd-epyc", "ibp1s0", "0000:02:00.0", nil},
		{"amd-epyc", "mlx5_0", "0000:02:00.0", nil},
		{"amd-epyc", "GPU4", "", node.ErrNoSuchDevice},
		{"amd-epyc", "NVME0", "", node.ErrNoSuchDevice},
		{"amd-epyc", "0000:99:00.0", "", node.ErrNoSuchDevice},
		{"amd-epyc", "eth9", "", node.ErrNoSuchDevice},
		{"vmd", "NVME1", "10000:e1:00.0", nil},
		{"vmd", "NVME0", "0000:01:00.0", nil},
		// The kernel's nvme2 is the matrix's NVME0, its nvme0 and nvme1 are NVME1 and
		// NVME2: as controller names and labels they name different functions.
		{"vmd", "nvme2", "", node.ErrAmbiguous},
		{"vmd", "nvme1", "", node.ErrAmbiguous},
		{"sriov-nic", "nic1", "0000:01:00.1", nil},
	}
	machines := map[string]*node.Node{}
	for _, tt := range tests {
		n := machines[tt.machine]
		if n == nil {
			n = load(t, tt.machine)
			machines[tt.machine] = n
		}
		d, err := n.Resolve(tt.name)
		got := ""
		if d != nil {
			got = d.Address.String()
		}
		if got != tt.want || !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
			t.Errorf("%s: Resolve(%q) = %q, %v; want %q, %v", tt.machine, tt.name, got, err, tt.want, tt.err)
		}
	}
}

func TestNameGPUs(t *testing.T) {
	n := load(t, "amd-epyc")
	a, err := pcie.ParseAddress("0000:41:00.0")
	if err != nil {
		t.Fatal(err)
	}
	n.NameGPUs() // no NVML facts: nothing changes
	if d := n.Topology.Device(a); d.DeviceName != "" {
		t.Fatalf("DeviceName = %q before NVML", d.DeviceName)
	}
	n.GPU = &gpu.Facts{GPUs: []gpu.GPU{{Address: &a, Name: "NVIDIA H100 PCIe"}}}
	n.NameGPUs()
	if got := n.Topology.Device(a).DeviceName; got != "NVIDIA H100 PCIe" {
		t.Errorf("DeviceName = %q, want NVML's name", got)
	}
	if got := n.Topology.GPUs()[0].DeviceName; got != "" {
		t.Errorf("GPU NVML did not report got the name %q", got)
	}
	// With the vendor named by pci.ids, NVML's repetition of it is dropped.
	d := n.Topology.GPUs()[0]
	d.VendorName = "NVIDIA Corporation"
	n.GPU.GPUs = append(n.GPU.GPUs, gpu.GPU{Address: &d.Address, Name: "NVIDIA H100 PCIe"})
	n.NameGPUs()
	if got := pcie.ProductText(d.Vendor, d.Record.Device, d.VendorName, d.DeviceName); got != "NVIDIA Corporation H100 PCIe" {
		t.Errorf("product = %q, want NVIDIA Corporation H100 PCIe", got)
	}
}
