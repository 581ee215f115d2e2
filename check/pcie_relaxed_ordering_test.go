package check_test

import (
	"testing"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/procfs"
)

// withRelaxedOrdering returns a copy of n whose GPUs and NICs have Device
// Control's Enable Relaxed Ordering bit (PCI_EXP_DEVCTL_RELAX_EN) as given.
func withRelaxedOrdering(n *node.Node, gpu, nic bool) *node.Node {
	set := map[pcie.Address]bool{}
	for _, d := range n.Topology.Devices {
		if d.Config != nil && d.Config.Express != nil && (d.IsGPU() || d.IsNIC()) {
			set[d.Address] = d.IsGPU() && gpu || d.IsNIC() && nic
		}
	}
	offsets := map[pcie.Address]int{}
	for _, d := range n.Topology.Devices {
		if _, ok := set[d.Address]; ok {
			offsets[d.Address] = int(d.Config.Express.Offset) + 8
		}
	}
	return withRecords(n, func(r *pcie.Record) {
		off, ok := offsets[r.Address]
		if !ok || off+2 > len(r.Config) {
			return
		}
		r.Config = append([]byte(nil), r.Config...)
		if set[r.Address] {
			r.Config[off] |= 0x10
		} else {
			r.Config[off] &^= 0x10
		}
	})
}

func params(kv map[string]string) *procfs.NVIDIAParams {
	return &procfs.NVIDIAParams{Values: kv}
}

func TestRelaxedOrdering(t *testing.T) {
	for _, tt := range []struct {
		name     string
		gpu, nic bool
		params   *procfs.NVIDIAParams
		nccl     map[string]string
		vm       bool
		want     verdict
	}{
		{"all allowed, defaults", true, true, params(map[string]string{"EnablePCIERelaxedOrderingMode": "0"}), nil, false,
			verdict{check.Pass, nil, "consistent", ""}},
		// NCCL's default uses relaxed ordering only where the NIC allows it.
		{"NIC forbids, NCCL default", true, false, params(map[string]string{"EnablePCIERelaxedOrderingMode": "0"}), nil, false,
			verdict{check.Pass, nil, "consistent", ""}},
		{"NIC forbids, NCCL forces", true, false, params(map[string]string{"EnablePCIERelaxedOrderingMode": "0"}),
			map[string]string{"NCCL_IB_PCI_RELAXED_ORDERING": "1"}, false, verdict{check.Warn, nil, "strictly ordered", "dmesg | grep -i 'relaxed ordering'"}},
		{"driver forces, GPU forbids", false, true, params(map[string]string{"EnablePCIERelaxedOrderingMode": "1"}), nil, false,
			verdict{check.Warn, nil, "strictly ordered", "dmesg"}},
		{"regkey forces, GPU forbids", false, true, params(map[string]string{"EnablePCIERelaxedOrderingMode": "0", "RegistryDwords": "RmSetPCIERelaxedOrdering=2"}), nil, false,
			verdict{check.Warn, nil, "strictly ordered", "dmesg"}},
		{"NCCL off in a VM", true, true, params(map[string]string{"EnablePCIERelaxedOrderingMode": "0"}),
			map[string]string{"NCCL_IB_PCI_RELAXED_ORDERING": "0"}, true, verdict{check.Warn, nil, "contradicts", "dmesg"}},
		{"GPU forbids, driver params unread", false, true, nil, nil, false,
			verdict{check.Unknown, nil, "whether the NVIDIA driver asks for it is unknown", "grep EnablePCIERelaxedOrderingMode"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := withRelaxedOrdering(loadMachine(t, "dgx-h100"), tt.gpu, tt.nic)
			n.Platform.NVIDIAParams = tt.params
			if tt.vm {
				withHypervisor(n)
			}
			r := run1(t, check.NewFacts(n, check.Inputs{NCCLEnv: tt.nccl}), "pcie_relaxed_ordering")
			judge(t, tt.want, r)
			if !r.PerformanceOnly {
				t.Errorf("pcie_relaxed_ordering is not performance_only")
			}
		})
	}
	// Without root Device Control is unread: unknown, and it never counts.
	f := check.NewFacts(loadMachine(t, "dgx-h100-nonroot"), check.Inputs{})
	res, err := check.Run(f, []string{"pcie_relaxed_ordering"})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != check.Unknown || check.Overall(check.Judge(res, nil), nil) != check.Pass {
		t.Errorf("non-root: %s (%s), overall %s; want an unknown that does not count", res[0].Status, res[0].Summary, check.Overall(res, nil))
	}
}

// withHypervisor makes n's CPU show the hypervisor flag, on a copy of its CPU.
func withHypervisor(n *node.Node) {
	cpu := *n.Platform.CPU
	cpu.Flags = append(append([]string(nil), cpu.Flags...), "hypervisor")
	n.Platform.CPU = &cpu
}
