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
func (fsys FS) IOMMUGroups() ([]IOMMUGroup, error) {
	ents, err := fsys.r.ReadDir(iommuGroups)
	if err != nil {
		return nil, hostfs.PathError("readdir", iommuGroups, err)
	}
	groups := []IOMMUGroup{}
	var errs []error
	for _, e := range ents {
		id, err := strconv.Atoi(e.Name)
		if err != nil || id < 0 {
			continue
		}
		g := IOMMUGroup{ID: id}
		name := join(iommuGroups, e.Name, "type")
		b, err := fsys.r.ReadFile(name, attrLimit)
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
