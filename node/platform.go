package node

import (
	"errors"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/kversion"
	"github.com/p2pkit/p2pkit/procfs"
	"github.com/p2pkit/p2pkit/sysfs"
)

// Platform holds the facts about a machine besides its PCI functions that the checks
// need. Every item is optional: nil (or an empty Source) means its file was absent.
type Platform struct {
	CPU          *procfs.CPUInfo      // /proc/cpuinfo
	Cmdline      *procfs.Cmdline      // /proc/cmdline
	Kernel       *kversion.Version    // /proc/version
	Modules      procfs.Modules       // /proc/modules; nil when absent, empty when none loaded
	CharDevices  []procfs.CharDevice  // /proc/devices; nil when absent
	NVIDIA       *procfs.NVIDIADriver // /proc/driver/nvidia/version
	NVIDIAParams *procfs.NVIDIAParams // /proc/driver/nvidia/params
	GDRDrvParams map[string]string    // /proc/driver/gdrdrv/params
	GDRDrvNode   *procfs.DevNode      // /dev/gdrdrv
	IOMMUGroups  []sysfs.IOMMUGroup   // /sys/kernel/iommu_groups; nil when absent
	IOMMUUnits   []string             // /sys/class/iommu entries (dmar0, ivhd0, ...); nil when absent
	// MemoryPeers maps each peer-memory client registered with a MOFED/DOCA ib_core
	// (nv_mem, nv_mem_nc for nvidia-peermem) to its version:
	// /sys/kernel/mm/memory_peers/<name>/version. Nil when the directory is absent.
	MemoryPeers  map[string]string
	KernelConfig procfs.KernelConfig // /proc/config.gz or /boot/config-<release>
	// ACSApplied is the record `p2pcheck fix --apply` left of the ACS bits it set
	// (run/p2pcheck/acs-applied.json, provision.StatePath), nil when absent.
	ACSApplied []byte
}

// acsAppliedPath and acsAppliedLimit are where and how much of fix --apply's record
// is read (provision.StatePath, which node does not import).
const (
	acsAppliedPath  = "run/p2pcheck/acs-applied.json"
	acsAppliedLimit = 1 << 20
)

// ReadPlatform reads every platform fact beneath root, from /proc and /dev (package
// procfs) and from /sys/kernel and /sys/class/iommu (package sysfs). Files that are
// absent leave their item nil and are no error. The error joins the failures of files
// that exist but could not be read or parsed; the Platform holds everything else even
// then.
func ReadPlatform(root hostfs.Root) (Platform, error) {
	return readPlatform(root, nil)
}

// readPlatform is ReadPlatform reading the types of the IOMMU groups that typed holds
// (every group when typed is nil; see sysfs.FS.IOMMUGroups).
func readPlatform(root hostfs.Root, typed func(id int) bool) (Platform, error) {
	proc, sys := procfs.New(root), sysfs.New(root)
	var p Platform
	var errs []error
	keep := func(err error) bool {
		ok, err := hostfs.Optional(err)
		if err != nil {
			errs = append(errs, err)
		}
		return ok
	}
	if c, err := proc.CPUInfo(); keep(err) {
		p.CPU = &c
	}
	if c, err := proc.Cmdline(); keep(err) {
		p.Cmdline = &c
	}
	if v, err := proc.KernelVersion(); keep(err) {
		p.Kernel = &v
	}
	if m, err := proc.Modules(); keep(err) {
		p.Modules = m
	}
	if d, err := proc.CharDevices(); keep(err) {
		p.CharDevices = d
	}
	if v, err := proc.NVIDIADriver(); keep(err) {
		p.NVIDIA = &v
	}
	if v, err := proc.NVIDIAParams(); keep(err) {
		p.NVIDIAParams = &v
	}
	if m, err := proc.GDRDrvParams(); keep(err) {
		p.GDRDrvParams = m
	}
	if n, err := proc.DevNode("gdrdrv"); keep(err) {
		p.GDRDrvNode = &n
	}
	// These two return what they could read along with their errors.
	groups, err := sys.IOMMUGroups(typed)
	keep(err)
	p.IOMMUGroups = groups
	if u, err := sys.IOMMUUnits(); keep(err) {
		p.IOMMUUnits = u
	}
	peers, err := sys.MemoryPeers()
	keep(err)
	p.MemoryPeers = peers
	if k, err := proc.KernelConfig(); keep(err) {
		p.KernelConfig = k
	}
	if b, err := root.ReadFile(acsAppliedPath, acsAppliedLimit); keep(err) {
		p.ACSApplied = b
	}
	return p, errors.Join(errs...)
}
