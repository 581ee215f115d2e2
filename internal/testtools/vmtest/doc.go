// Package vmtest is p2pkit's kernel-in-the-loop test tier: it boots real Linux
// kernels under QEMU (q35, TCG, no KVM needed) on emulated PCIe topologies, runs
// p2pcheck inside, and compares it with what the kernel itself shows and decides.
//
// # Running
//
// The tier is behind the vmtest build tag, so `go test ./...` never boots a guest:
//
//	scripts/fetch-kernel.sh                      # Debian's stock kernel into the cache
//	go test -tags vmtest -run TestTopologies -v ./internal/testtools/vmtest/
//	go test -tags vmtest -run 'TestTopologies/iommu-acs-oracle' -v ./internal/testtools/vmtest/
//
// It needs qemu-system-x86_64 and a static busybox (Debian: qemu-system-x86,
// busybox-static). Kernels: the P2PDMA test kernel ../shared/kernel/bzImage-6.12-p2poracle
// relative to the module root ("oracle") and Debian's stock kernel ("debian") from
// scripts/fetch-kernel.sh. A missing QEMU, busybox or kernel skips with the reason;
// with P2PKIT_REQUIRE_HW=1 it fails instead. Overrides: P2PKIT_QEMU, P2PKIT_BUSYBOX,
// P2PKIT_ORACLE_KERNEL, P2PKIT_DEBIAN_KERNEL (and P2PKIT_DEBIAN_PFSTUB, its
// pci-pf-stub.ko), P2PKIT_CACHE (the fetch script's cache,
// default $XDG_CACHE_HOME/p2pkit). P2PKIT_VM_UPDATE=1 (or -update) rewrites the kept
// captures under testdata/vm.
//
// Each run prints a summary line "vmtest <topology> <kernel> PASS|FAIL|SKIP <secs>".
//
// # What a run checks
//
// The guest's /init (InitScript) takes captures with busybox only — uname, dmesg, and
// a listing of every PCI function read from sysfs and its config file with od
// (CapturePCI: path, IDs, bus numbers, port type, ACS Control found by walking the
// extended capabilities as setpci ECAP_ACS+6.w does, IOMMU group, NUMA node, PF) —
// then p2pcheck's snapshot (base64 on the console), `topo --format json` and
// `pairs --all --format json`, and, on the entry with an NVMe CMB, package p2pmem's
// TestGuestRoundTrip. Each capture is printed between ==P2PKIT-BEGIN/END== markers
// (ParseConsole). On the host:
//
//   - tree: the busybox view equals the entry's expected tree (Topology.Want): every
//     function's address, host bridge, parent bridge, vendor:device, port type and
//     bridge bus range; switch grouping follows from parents and port types.
//   - kernel-facts: ACS Control on exactly the root ports equals the entry's value
//     for that kernel, IOMMU groups exist exactly with a vIOMMU, NUMA nodes follow
//     the pxb-pcie numa_node.
//   - oracle (test kernel): one verdict per ordered pair of type-0 functions and the
//     expected cpu_supports_p2pdma.
//   - snapshot: the snapshot through snapshot.Read, PCIRecords and
//     pcie.NewTopology equals the expected tree and the busybox facts.
//   - topo: `p2pcheck topo --format json`, read from the live guest rather than a
//     snapshot, gives the same tree, the entry's switches (upstream port and its
//     downstream ports) and the same ACS, IOMMU group and NUMA facts.
//   - pairs (test kernel): every ordered pair p2pcheck prints equals the kernel's map
//     type and distance, and no pair is missing. The oracle runs before VFs exist, so
//     a VF's verdict is taken from its PF (Oracle.WithVFs).
//   - fix (test kernel, entries with Fix): the provisioning steps of `p2pcheck fix`,
//     judged by the kernel. The guest runs `pairs --all --assume acs-redirect=off`,
//     checksums every config file, runs `fix` (dry run), checksums again, runs
//     `fix --apply`, asks the kernel for fresh verdicts (writing
//     /sys/module/p2pdma/parameters/p2poracle_rerun, ParseOracleRerun), runs `pairs
//     --all` again, then the p2pmem round trip (only now: the kernel caches a verdict
//     once a driver asked for it), then `fix --apply` once more. The checks: the
//     what-if equals the kernel's fresh verdict for every ordered pair; the dry run
//     changed no config byte; --apply cleared exactly the root port above the CMB
//     NVMe, read it back, and every pair it reports equals both its own prediction
//     and the kernel's fresh verdict, as do the pairs read again; the CMB provider
//     and its peer function were not-supported (Intel) or thru-host-bridge (EPYC) at
//     boot and are bus-addr afterwards; the round trip passes; the second run has
//     nothing to do and exits 0.
//
// # Adding a topology
//
// Append a Topology to Catalogue: a Name, a Doc line, the CPU model, kernel
// parameters, IOMMU and NUMA settings, and the tree as Nodes (rootPort, sw, dsp, ep,
// pciBridge, at). The tree is the single source of the QEMU command line
// (QEMUArgs) and of the expected guest view (Want), which assumes the firmware's
// depth-first bus numbering. Set ACSControl (and ACSControlOn where a kernel
// differs) and CPUP2P from the kernel's rules, run the tier for the new entry with
// P2PKIT_VM_UPDATE=1, review the new testdata/vm/<name>-<kernel>/ files and commit
// them.
package vmtest
