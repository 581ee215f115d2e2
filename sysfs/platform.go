package sysfs

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/kversion"
)

// Platform holds the facts about a machine besides its PCI functions that the checks
// need. Every item is optional: nil (or an empty Source) means its file was absent.
type Platform struct {
	CPU          *CPUInfo          // /proc/cpuinfo
	Cmdline      *Cmdline          // /proc/cmdline
	Kernel       *kversion.Version // /proc/version
	Modules      []Module          // /proc/modules; nil when absent, empty when none loaded
	CharDevices  []CharDevice      // /proc/devices; nil when absent
	NVIDIA       *NVIDIADriver     // /proc/driver/nvidia/version
	GDRDrvParams map[string]string // /proc/driver/gdrdrv/params
	GDRDrvNode   *DevNode          // /dev/gdrdrv
	IOMMUGroups  []IOMMUGroup      // /sys/kernel/iommu_groups; nil when absent
	IOMMUUnits   []string          // /sys/class/iommu entries (dmar0, ivhd0, ...); nil when absent
	// MemoryPeers maps each peer-memory client registered with a MOFED/DOCA ib_core
	// (nv_mem, nv_mem_nc for nvidia-peermem) to its version:
	// /sys/kernel/mm/memory_peers/<name>/version. Nil when the directory is absent.
	MemoryPeers  map[string]string
	KernelConfig KernelConfig // /proc/config.gz or /boot/config-<release>
}

// Platform reads every platform fact. Files that are absent leave their item nil and
// are no error. The error joins the failures of files that exist but could not be read
// or parsed; the Platform holds everything else even then.
func (fsys FS) Platform() (Platform, error) {
	var p Platform
	var errs []error
	keep := func(err error) bool {
		ok, err := optional(err)
		if err != nil {
			errs = append(errs, err)
		}
		return ok
	}
	if c, err := fsys.CPUInfo(); keep(err) {
		p.CPU = &c
	}
	if c, err := fsys.Cmdline(); keep(err) {
		p.Cmdline = &c
	}
	if v, err := fsys.KernelVersion(); keep(err) {
		p.Kernel = &v
	}
	if m, err := fsys.Modules(); keep(err) {
		p.Modules = m
	}
	if d, err := fsys.CharDevices(); keep(err) {
		p.CharDevices = d
	}
	if v, err := fsys.NVIDIADriver(); keep(err) {
		p.NVIDIA = &v
	}
	if m, err := fsys.GDRDrvParams(); keep(err) {
		p.GDRDrvParams = m
	}
	if n, err := fsys.DevNode("gdrdrv"); keep(err) {
		p.GDRDrvNode = &n
	}
	// These two return what they could read along with their errors.
	groups, err := fsys.IOMMUGroups()
	keep(err)
	p.IOMMUGroups = groups
	if u, err := fsys.IOMMUUnits(); keep(err) {
		p.IOMMUUnits = u
	}
	peers, err := fsys.MemoryPeers()
	keep(err)
	p.MemoryPeers = peers
	if k, err := fsys.KernelConfig(); keep(err) {
		p.KernelConfig = k
	}
	return p, errors.Join(errs...)
}

// DevNode describes a device node under /dev.
type DevNode struct {
	Mode fs.FileMode // type and permission bits; a character device has fs.ModeCharDevice
	// Major and Minor are the device number; NumberKnown is false when the node is
	// not a device or its number could not be read (a non-Linux host).
	Major, Minor uint32
	NumberKnown  bool
}

// DevNode describes /dev/<name> without opening it; a link is described, not followed.
func (fsys FS) DevNode(name string) (DevNode, error) {
	if name == "" || strings.Contains(name, "..") {
		return DevNode{}, fmt.Errorf("sysfs: bad device node name %q", name)
	}
	p := join("dev", name)
	fi, err := fsys.t.lstat(p)
	if err != nil {
		return DevNode{}, pathErr("lstat", p, err)
	}
	return DevNode{Mode: fi.mode, Major: fi.major, Minor: fi.minor, NumberKnown: fi.hasDev}, nil
}

// IOMMUGroup is one directory of /sys/kernel/iommu_groups.
type IOMMUGroup struct {
	ID   int
	Type IOMMUDomainType // the type attribute; IOMMUUnknown on kernels without it
}

const iommuGroups = "sys/kernel/iommu_groups"

// IOMMUGroups reads /sys/kernel/iommu_groups/*/type (drivers/iommu/iommu.c), in group
// order. Groups exist only when an IOMMU driver is active. A type that cannot be read
// or parsed is reported in the error and left IOMMUUnknown; the other groups are
// still returned.
func (fsys FS) IOMMUGroups() ([]IOMMUGroup, error) {
	ents, err := fsys.t.readDir(iommuGroups)
	if err != nil {
		return nil, pathErr("readdir", iommuGroups, err)
	}
	groups := []IOMMUGroup{}
	var errs []error
	for _, e := range ents {
		id, err := strconv.Atoi(e.name)
		if err != nil || id < 0 {
			continue
		}
		g := IOMMUGroup{ID: id}
		name := join(iommuGroups, e.name, "type")
		b, err := fsys.readFile(name, attrLimit)
		if ok, err := optional(err); err != nil {
			errs = append(errs, err)
		} else if ok {
			if g.Type, err = parseIOMMUDomainType(b); err != nil {
				errs = append(errs, pathErr("parse", name, err))
			}
		}
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b IOMMUGroup) int { return a.ID - b.ID })
	return groups, errors.Join(errs...)
}

// IOMMUUnits lists /sys/class/iommu: one entry per hardware IOMMU the kernel drives
// (dmarN for Intel VT-d, ivhdN for AMD-Vi, smmu3.* on arm64, ...).
func (fsys FS) IOMMUUnits() ([]string, error) {
	return fsys.names("sys/class/iommu")
}

const memoryPeers = "sys/kernel/mm/memory_peers"

// MemoryPeers reads /sys/kernel/mm/memory_peers/<name>/version, where MOFED/DOCA
// ib_core lists its peer-memory clients; NCCL looks for nv_mem and nv_mem_nc there
// to decide whether GPUDirect RDMA through nvidia-peermem is available. A client
// without a readable version maps to "" and, when the file exists, is reported in the
// error.
func (fsys FS) MemoryPeers() (map[string]string, error) {
	names, err := fsys.names(memoryPeers)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	var errs []error
	for _, n := range names {
		b, err := fsys.readFile(join(memoryPeers, n, "version"), attrLimit)
		if ok, err := optional(err); err != nil {
			errs = append(errs, err)
		} else if ok {
			m[n] = attrString(b)
		} else {
			m[n] = ""
		}
	}
	return m, errors.Join(errs...)
}

// names lists the directory dir.
func (fsys FS) names(dir string) ([]string, error) {
	ents, err := fsys.t.readDir(dir)
	if err != nil {
		return nil, pathErr("readdir", dir, err)
	}
	out := make([]string, len(ents))
	for i, e := range ents {
		out[i] = e.name
	}
	return out, nil
}
