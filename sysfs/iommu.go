package sysfs

// This file reads the IOMMU groups of /sys/kernel/iommu_groups
// (drivers/iommu/iommu.c) and the IOMMU units of /sys/class/iommu
// (drivers/iommu/iommu-sysfs.c).

import (
	"errors"
	"slices"
	"strconv"

	"github.com/p2pkit/p2pkit/hostfs"
)

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
//
// The groups directory is opened once and each group below it, so that a type costs
// the open and read of one name, not a walk of its whole path: a node has a group
// per function or more.
func (fsys FS) IOMMUGroups() ([]IOMMUGroup, error) {
	dir, err := fsys.r.Sub(iommuGroups)
	if err != nil {
		return nil, hostfs.PathError("open", iommuGroups, err)
	}
	defer dir.Close()
	ents, err := dir.ReadDir(".")
	if err != nil {
		return nil, hostfs.PathError("readdir", iommuGroups, err)
	}
	groups := []IOMMUGroup{}
	var errs []error
	buf := make([]byte, attrLimit+1)
	for _, e := range ents {
		id, err := strconv.Atoi(e.Name)
		if err != nil || id < 0 {
			continue
		}
		g := IOMMUGroup{ID: id}
		name := join(iommuGroups, e.Name, "type")
		b, err := readGroupType(dir, e.Name, buf)
		if ok, err := hostfs.Optional(err); err != nil {
			errs = append(errs, err)
		} else if ok {
			if g.Type, err = parseIOMMUDomainType(b); err != nil {
				errs = append(errs, hostfs.PathError("parse", name, err))
			}
		}
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b IOMMUGroup) int { return a.ID - b.ID })
	return groups, errors.Join(errs...)
}

// readGroupType reads the type attribute of the group directory id below dir into
// buf, one byte longer than the longest type read. Errors name the whole path.
func readGroupType(dir hostfs.Root, id string, buf []byte) ([]byte, error) {
	g, err := dir.Sub(id)
	if err != nil {
		return nil, hostfs.PathError("open", join(iommuGroups, id), err)
	}
	defer g.Close()
	return g.ReadBounded("type", join(iommuGroups, id), buf, false)
}

// IOMMUUnits lists /sys/class/iommu: one entry per hardware IOMMU the kernel drives
// (dmarN for Intel VT-d, ivhdN for AMD-Vi, smmu3.* on arm64, ...).
func (fsys FS) IOMMUUnits() ([]string, error) {
	return fsys.names("sys/class/iommu")
}

// names lists the directory dir.
func (fsys FS) names(dir string) ([]string, error) {
	ents, err := fsys.r.ReadDir(dir)
	if err != nil {
		return nil, hostfs.PathError("readdir", dir, err)
	}
	out := make([]string, len(ents))
	for i, e := range ents {
		out[i] = e.Name
	}
	return out, nil
}
