// Package node gathers what p2pcheck knows about one machine, live or from a
// snapshot: the PCIe topology with pci.ids names, the platform facts, and the
// inputs of the kernel's P2PDMA rules. It is the one place where the I/O packages
// (hostfs and snapshot for the root, sysfs and procfs reading beneath it, pciids)
// meet the pure ones (pcie, p2pdma).
package node

import (
	"errors"
	"fmt"

	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/kversion"
	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/sysfs"
)

// Options tune Load.
type Options struct {
	// Kernel overrides the kernel version whose P2PDMA whitelist applies
	// ("6.12"); empty means the analysed kernel's own (/proc/version).
	Kernel string
	// PCIIDs is the pci.ids file to name devices from; empty searches the usual
	// places. Names are optional: without a database devices are shown by ID.
	PCIIDs string
	// NoNames skips loading pci.ids.
	NoNames bool
	// NoPlatform skips the platform facts (/proc, IOMMU groups, kernel config) for
	// commands that show the tree alone; P2P then gives no CPU or kernel facts.
	NoPlatform bool
	// NoGPU leaves out the NVML facts a snapshot recorded (Node.GPU stays nil), for
	// runs that would not have asked NVML on the live machine either.
	NoGPU bool
}

// Node is one machine as p2pcheck sees it.
type Node struct {
	Topology *pcie.Topology
	// Platform holds the facts besides the PCI functions; the inputs of the
	// kernel's P2PDMA decision are derived from it (see P2P).
	Platform Platform
	// GPU holds NVML's facts: those a snapshot recorded when it was taken (Load
	// fills them in unless Options.NoGPU), or those of the live machine when the
	// caller asked NVML (package gpu); nil otherwise.
	GPU *gpu.Facts
	// Warnings are problems that degrade the picture without stopping it: an
	// unreadable /proc file, a missing pci.ids, per-device read errors.
	Warnings []error

	// kernel is Options.Kernel, which overrides Platform.Kernel in P2P; release is
	// the same with its patch number.
	kernel, release kversion.Version
}

// Release returns the release of the analysed kernel with its patch number
// (Options.Kernel when it was given, else /proc/version's), the zero Version when
// unknown: what decides which boot parameters it parses (package provision).
func (n *Node) Release() kversion.Version {
	switch {
	case !n.release.IsZero():
		return n.release
	case n.Platform.Kernel != nil:
		return *n.Platform.Kernel
	}
	return kversion.Version{}
}

// P2P returns the platform inputs of the kernel's P2PDMA decision, derived from
// Platform: CPU 0's vendor and family, and the release series of the kernel
// (Options.Kernel when it was given, else /proc/version's).
func (n *Node) P2P() p2pdma.Platform {
	var pp p2pdma.Platform
	p := n.Platform
	if p.CPU != nil {
		pp.CPUVendor, pp.CPUFamily = p.CPU.VendorID, p.CPU.Family
	}
	switch {
	case !n.kernel.IsZero():
		pp.Kernel = n.kernel
	case p.Kernel != nil:
		pp.Kernel = p.Kernel.Series()
	}
	return pp
}

// ErrBadKernelVersion is returned for an unusable Options.Kernel.
var ErrBadKernelVersion = errors.New("node: bad kernel version")

// Load reads the machine beneath root. It fails only when there is no PCI sysfs at
// all; everything else degrades into Warnings.
func Load(root hostfs.Root, opt Options) (*Node, error) {
	n := &Node{}
	var override, release kversion.Version
	if opt.Kernel != "" {
		v, err := kversion.Parse(opt.Kernel)
		if err != nil {
			return nil, fmt.Errorf("%w %q: %w", ErrBadKernelVersion, opt.Kernel, err)
		}
		override, release = v.Series(), v
	}
	// The platform's files are read beside sysfs's; every path waits for them
	// before it returns, so nothing reads root once Load is done. Of the IOMMU
	// groups, one a function or more, only the types of the groups of the devices of
	// interest are read, once the tree is known (readIOMMUTypes).
	var platform func() (Platform, error)
	if !opt.NoPlatform {
		platform = readPlatformAsync(root)
	}
	recs, err := sysfs.New(root).PCIRecords()
	if err != nil {
		if platform != nil {
			platform()
		}
		return nil, err
	}
	if err := foldMissingConfig(recs); err != nil {
		n.Warnings = append(n.Warnings, err)
	}
	n.Topology = pcie.NewTopology(recs)
	if err := depthWithin(n.Topology, root.Budget().PCIDepth); err != nil {
		if platform != nil {
			platform()
		}
		return nil, err
	}
	// The topology's errors hold each record's read error and what decoding and
	// placing the functions found.
	n.Warnings = append(n.Warnings, n.Topology.Errors...)
	if platform != nil {
		n.Platform, err = platform()
		if err != nil {
			n.Warnings = append(n.Warnings, err)
		}
		if err := n.readIOMMUTypes(root); err != nil {
			n.Warnings = append(n.Warnings, err)
		}
		n.kernel, n.release = override, release
	}
	n.snapshotFacts(root, opt)
	if !opt.NoNames {
		if err := nameDevices(root.Meter(), opt.PCIIDs, n.Topology); err != nil {
			n.Warnings = append(n.Warnings, err)
		}
	}
	return n, nil
}

// readPlatformAsync starts ReadPlatform of root and returns the wait for its result.
func readPlatformAsync(root hostfs.Root) func() (Platform, error) {
	type result struct {
		p   Platform
		err error
	}
	done := make(chan result, 1)
	go func() {
		p, err := readPlatform(root, func(int) bool { return false })
		done <- result{p, err}
	}()
	return func() (Platform, error) {
		r := <-done
		return r.p, r.err
	}
}

// readIOMMUTypes reads the types of the IOMMU groups of the devices of interest
// (Interesting), the groups whose types the checks and diff judge; the others stay
// sysfs.IOMMUNotRead.
func (n *Node) readIOMMUTypes(root hostfs.Root) error {
	groups := map[int]bool{}
	for _, d := range n.Interesting() {
		if d.IOMMUGroup != nil {
			groups[*d.IOMMUGroup] = true
		}
	}
	return sysfs.New(root).IOMMUTypes(n.Platform.IOMMUGroups, func(id int) bool { return groups[id] })
}

// depthWithin refuses a tree with a function below more than limit bridges
// (hostfs.Budget.PCIDepth). Parents are found by address (pcie.NewTopology), so
// functions whose sysfs paths are short can still form a chain of any depth.
func depthWithin(t *pcie.Topology, limit int) error {
	for _, d := range t.Devices {
		if d.Depth() > limit {
			return fmt.Errorf("node: %s: %d bridges above it: %w", d.Address, d.Depth(),
				&hostfs.BudgetError{Limit: "PCIDepth", Value: int64(limit), What: "bridges above a function"})
		}
	}
	return nil
}
