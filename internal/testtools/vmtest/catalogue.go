package vmtest

// Catalogue returns the topologies the tier boots, in a fixed order. Each call builds
// fresh values, so a caller may keep *Node pointers without sharing them.
//
// ACS expectations (drivers/pci/pci.c pci_std_enable_acs, pci_disable_acs_redir;
// QEMU hw/pci/pcie.c pcie_acs_init): QEMU implements
// ACS only on pcie-root-port (capability 0x005f, Control 0 at reset). Without a vIOMMU
// the kernel leaves Control at 0; with intel-iommu and intel_iommu=on it requests ACS
// and programs SV|RR|CR|UF = 0x001d; pci=disable_acs_redir= then clears RR|CR|EC,
// leaving 0x0011.
func Catalogue() []*Topology {
	var ts []*Topology

	ts = append(ts, &Topology{
		Name: "switch-nvme",
		Doc:  "one x3130 switch with three NVMe below its downstream ports",
		CPU:  "Skylake-Server",
		Root: []*Node{rootPort(2, sw(dsp(ep(NVMe)), dsp(ep(NVMe)), dsp(ep(NVMe))))},
	})

	cmb, peer := ep(NVMe, "cmb_size_mb=64"), ep(NVMe)
	ts = append(ts, &Topology{
		Name:   "switch-cmb",
		Doc:    "an NVMe with a 64 MiB CMB (a p2pmem provider) and a peer NVMe under one switch",
		CPU:    "Skylake-Server",
		Root:   []*Node{rootPort(2, sw(dsp(cmb), dsp(peer)))},
		P2PMem: &P2PMemProof{Provider: cmb, Target: peer},
	})

	ts = append(ts, &Topology{
		Name: "nested-switch",
		Doc:  "a switch below a switch, NVMe at both levels, and a second root port",
		CPU:  "Skylake-Server",
		Root: []*Node{
			rootPort(2, sw(dsp(sw(dsp(ep(NVMe)), dsp(ep(NVMe)))), dsp(ep(NVMe)))),
			rootPort(3, ep(NVMe)),
		},
	})

	ts = append(ts, &Topology{
		Name: "multifunction",
		Doc:  "two-function e1000e devices directly below a root port and below a switch port",
		CPU:  "Skylake-Server",
		Root: []*Node{
			rootPort(2, at(ep(E1000E), 0, 0), at(ep(E1000E), 0, 1)),
			rootPort(3, sw(dsp(at(ep(NVMe), 0, 0), at(ep(E1000E), 0, 1)), dsp(ep(NVMe)))),
		},
	})

	ts = append(ts, &Topology{
		Name: "pcie-pci-bridge",
		Doc:  "conventional PCI devices (e1000, pci-testdev) behind a pcie-pci-bridge, next to an NVMe",
		CPU:  "Skylake-Server",
		Root: []*Node{
			rootPort(2, pciBridge(at(ep(E1000), 1, 0), at(ep(TestDev), 2, 0))),
			rootPort(3, ep(NVMe)),
		},
	})

	ts = append(ts, &Topology{
		Name:      "pxb-numa",
		Doc:       "a pxb-pcie host bridge on NUMA node 1 beside pcie.0, an NVMe under each",
		CPU:       "Skylake-Server",
		NUMANodes: 2,
		Root: []*Node{
			rootPort(2, ep(NVMe)),
			{Kind: PXB, Slot: 0x10, BusNr: 0x40, NUMANode: 1, Children: []*Node{
				rootPort(0, sw(dsp(ep(NVMe)), dsp(ep(NVMe)))),
			}},
		},
	})

	ts = append(ts, &Topology{
		Name:       "iommu-acs",
		Doc:        "intel-iommu: the kernel enables ACS on root ports; a multifunction device below one loses bus-addr",
		CPU:        "Skylake-Server",
		IOMMU:      true,
		ACSControl: 0x001d,
		Root: []*Node{
			rootPort(2, sw(dsp(ep(NVMe)), dsp(ep(NVMe)))),
			rootPort(3, at(ep(NVMe), 0, 0), at(ep(E1000E), 0, 1)),
		},
	})

	ts = append(ts, &Topology{
		Name:       "iommu-acs-redir-off",
		Doc:        "intel-iommu with pci=disable_acs_redir=pci:1b36:000c: RR and CR cleared again",
		CPU:        "Skylake-Server",
		IOMMU:      true,
		Append:     []string{"pci=disable_acs_redir=pci:1b36:000c"},
		ACSControl: 0x0011,
		// 6.11's __pci_config_acs() (commit 47c8846a49ba) starts from the firmware's
		// Control (0 in QEMU), not from what pci_std_enable_acs() set, so clearing the
		// redirect bits leaves nothing: p2pdma-kernel.md §1.7.
		ACSControlOn: map[string]uint16{KernelOracle: 0x0000},
		Root: []*Node{
			rootPort(2, sw(dsp(ep(NVMe)), dsp(ep(NVMe)))),
			rootPort(3, at(ep(NVMe), 0, 0), at(ep(E1000E), 0, 1)),
		},
	})

	ts = append(ts, &Topology{
		Name:   "epyc",
		Doc:    "an AMD EPYC CPU: the kernel's Zen rule allows traffic through the host bridge",
		CPU:    "EPYC",
		CPUP2P: true,
		Root: []*Node{
			rootPort(2, ep(NVMe)),
			rootPort(3, sw(dsp(ep(NVMe)), dsp(ep(NVMe)))),
		},
	})

	ts = append(ts, &Topology{
		Name:       "epyc-iommu",
		Doc:        "EPYC with intel-iommu: ACS on root ports sends pairs through the host bridge, which Zen allows",
		CPU:        "EPYC",
		CPUP2P:     true,
		IOMMU:      true,
		ACSControl: 0x001d,
		Root: []*Node{
			rootPort(2, at(ep(NVMe), 0, 0), at(ep(NVMe), 0, 1)),
			rootPort(3, ep(NVMe)),
		},
	})

	pf := ep(NVMe, "sriov_max_vfs=2", "sriov_vq_flexible=4", "sriov_vi_flexible=2",
		"max_ioqpairs=6", "msix_qsize=3")
	pf.Subsys, pf.VFs = "subsys0", 2
	ts = append(ts, &Topology{
		Name: "sriov-nvme",
		Doc:  "an SR-IOV NVMe with two VFs enabled from the guest (a VF counts as its PF) and a peer",
		CPU:  "Skylake-Server",
		Root: []*Node{rootPort(2, sw(dsp(pf), dsp(ep(NVMe))))},
	})

	// A multifunction NVMe below a root port, function 0 with a CMB: with the
	// vIOMMU the kernel sets ACS redirect on the root port, which it counts on the
	// common upstream bridge itself, so the two functions are not-supported on an
	// Intel CPU model and thru-host-bridge on EPYC, and bus-addr once `p2pcheck fix
	// --apply` cleared the root port's redirect. A plain NVMe below a second root
	// port shares no bridge with them. iommu=pt keeps ACS (pci_request_acs() comes
	// with the DMAR table) but lets QEMU carry the bus-address DMA of the p2pmem
	// proof, which a translating vIOMMU would fault. no_timer_check skips the boot's
	// timer test (timer_irq_works() in arch/x86/kernel/apic/io_apic.c), which under
	// TCG on a loaded host can fail with interrupt remapping on and panic the guest.
	for _, cpu := range []struct {
		name, model string
		zen         bool
	}{{"fix-cmb", "Skylake-Server", false}, {"fix-cmb-epyc", "EPYC", true}} {
		cmb, peer := at(ep(NVMe, "cmb_size_mb=64"), 0, 0), at(ep(NVMe), 0, 1)
		ts = append(ts, &Topology{
			Name: cpu.name,
			Doc: "intel-iommu, a multifunction NVMe (function 0 with a CMB) below a root port " +
				"with ACS redirect, made P2P-ready by p2pcheck fix --apply",
			CPU:        cpu.model,
			CPUP2P:     cpu.zen,
			IOMMU:      true,
			Append:     []string{"iommu=pt", "no_timer_check"},
			ACSControl: 0x001d,
			Root:       []*Node{rootPort(2, cmb, peer), rootPort(3, ep(NVMe))},
			P2PMem:     &P2PMemProof{Provider: cmb, Target: peer},
			Fix:        true,
		})
	}

	// fix-cmb booted with the parameter `p2pcheck fix --persist` writes for it
	// (testdata/vm/fix-cmb-oracle/fix-dry.json): the kernel leaves RR and CR clear on
	// that root port from enumeration on (6.11's __pci_config_acs() starts from the
	// firmware's 0, see iommu-acs-redir-off) and sets them on the other one; the CMB
	// pair is bus-addr at boot and `p2pcheck fix` has nothing to do.
	cmb, peer = at(ep(NVMe, "cmb_size_mb=64"), 0, 0), at(ep(NVMe), 0, 1)
	persisted := rootPort(2, cmb, peer)
	persisted.ACSOn = map[string]uint16{KernelDebian: 0x0011, KernelOracle: 0x0000}
	ts = append(ts, &Topology{
		Name:       "fix-cmb-persist",
		Doc:        "fix-cmb booted with the pci=disable_acs_redir= parameter p2pcheck fix --persist writes for it",
		CPU:        "Skylake-Server",
		IOMMU:      true,
		Append:     []string{"iommu=pt", "no_timer_check", persistedParam},
		ACSControl: 0x001d,
		Root:       []*Node{persisted, rootPort(3, ep(NVMe))},
		P2PMem:     &P2PMemProof{Provider: cmb, Target: peer},
		Persisted:  true,
	})

	// fix-cmb booted with the parameter `p2pcheck fix` now plans for it on the test
	// kernel, 6.12.117, which has the fixed pci=config_acs= (commit 9cf8a952d57b in
	// 6.12.23): every bit given, so the root port reads the planned 0x0011, SV and UF
	// kept, where pci=disable_acs_redir= left 0x0000 (fix-cmb-persist). The CMB pair is
	// bus-addr at boot, the NVMe functions join the root port's IOMMU group, and `p2pcheck
	// fix` has nothing to do. Debian's 6.1 does not know config_acs=, so the entry is
	// for the test kernel only.
	cmb, peer = at(ep(NVMe, "cmb_size_mb=64"), 0, 0), at(ep(NVMe), 0, 1)
	configured := rootPort(2, cmb, peer)
	configured.ACSOn = map[string]uint16{KernelOracle: 0x0011}
	ts = append(ts, &Topology{
		Name:       "fix-cmb-config-acs",
		Doc:        "fix-cmb booted with the pci=config_acs= parameter p2pcheck fix --persist writes for it on Linux 6.12.23 and later",
		CPU:        "Skylake-Server",
		IOMMU:      true,
		OnlyOn:     KernelOracle,
		Append:     []string{"iommu=pt", "no_timer_check", configACSParam},
		ACSControl: 0x001d,
		Root:       []*Node{configured, rootPort(3, ep(NVMe))},
		P2PMem:     &P2PMemProof{Provider: cmb, Target: peer},
		Persisted:  true,
	})

	// A virtualization host as QEMU can build one: intel-iommu with device-IOTLB (so
	// that ATS can translate), a NIC with ATS (virtio-net, ats=on) and an NVMe with a
	// CMB on root ports of their own, and the same pair below QEMU's x3130 switch,
	// whose ports have no ACS (QEMU 7.2 implements ACS only on pcie-root-port,
	// hw/pci/pcie.c pcie_acs_init). Booted with the pci=config_acs= value a
	// virtualization-host plan gives a port with Direct Translated P2P (0x005d: DT,
	// SV, RR, CR, UF) on the NIC's root port; `p2pcheck fix --virt-host` keeps the
	// kernel's isolation and has nothing to do, see checkVirtHost.
	nic, cmbPeer := ep(VirtioNet, "ats=on"), ep(NVMe, "cmb_size_mb=16")
	swNIC, swPeer := ep(VirtioNet, "ats=on"), ep(NVMe)
	nicPort := rootPort(2, nic)
	nicPort.ACSOn = map[string]uint16{KernelOracle: 0x005d}
	ts = append(ts, &Topology{
		Name:        "virt-host-ats",
		Doc:         "intel-iommu with device-IOTLB, NICs with ATS beside an NVMe on root ports and below a switch, the NIC's root port booted with Direct Translated P2P",
		CPU:         "Skylake-Server",
		IOMMU:       true,
		DeviceIOTLB: true,
		OnlyOn:      KernelOracle,
		Append:      []string{"no_timer_check", virtHostParam},
		ACSControl:  0x001d,
		Root:        []*Node{nicPort, rootPort(3, cmbPeer), rootPort(4, sw(dsp(swNIC), dsp(swPeer)))},
		VirtHost:    &VirtHostProof{NIC: nic, Peer: cmbPeer, SwitchNIC: swNIC, SwitchPeer: swPeer},
	})

	return ts
}

// persistedParam is the boot parameter `p2pcheck fix` planned for fix-cmb on kernels
// before 6.11, which fix-cmb-persist boots with; configACSParam the one it plans on
// the test kernel (a test checks it against the kept plan); virtHostParam the
// config_acs= form of Direct Translated P2P with isolation kept.
const (
	persistedParam = "pci=disable_acs_redir=0000:00:02.0"
	configACSParam = "pci=config_acs=0010001@0000:00:02.0"
	virtHostParam  = "pci=config_acs=1011101@0000:00:02.0"
)

// rootPort is a pcie-root-port at slot on its root bus with kids below it.
func rootPort(slot uint8, kids ...*Node) *Node {
	return &Node{Kind: RootPort, Slot: slot, Children: kids}
}

// sw is an x3130 switch: its upstream port, with the downstream ports at slots 0, 1, ...
func sw(ports ...*Node) *Node {
	for i, p := range ports {
		p.Slot = uint8(i)
	}
	return &Node{Kind: Upstream, Children: ports}
}

// dsp is an xio3130 downstream port with kids below it.
func dsp(kids ...*Node) *Node {
	return &Node{Kind: Downstream, Children: kids}
}

// pciBridge is a pcie-pci-bridge with conventional PCI devices below it (slot 0 of
// its secondary bus is taken by its SHPC, so place them with at()).
func pciBridge(kids ...*Node) *Node {
	return &Node{Kind: PCIBridge, Children: kids}
}

// ep is a device of kind k at 00.0 with extra -device properties.
func ep(k Kind, props ...string) *Node {
	return &Node{Kind: k, Props: props}
}

// at places n at slot.fn on its parent bus.
func at(n *Node, slot, fn uint8) *Node {
	n.Slot, n.Func = slot, fn
	return n
}
