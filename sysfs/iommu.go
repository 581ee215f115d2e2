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

// IOMMUGroups lists /sys/kernel/iommu_groups, in group order, and reads the type
// attribute (drivers/iommu/iommu.c) of each group typed holds, or of every group when
// typed is nil; the others are IOMMUNotRead (see IOMMUTypes). Groups exist only when
// an IOMMU driver is active. A type that cannot be read or parsed is reported in the
// error and left IOMMUUnknown; the other groups are still returned.
func (fsys FS) IOMMUGroups(typed func(id int) bool) ([]IOMMUGroup, error) {
	ents, err := fsys.r.ReadDir(iommuGroups)
	if err != nil {
		return nil, hostfs.PathError("readdir", iommuGroups, err)
	}
	groups := []IOMMUGroup{}
	for _, e := range ents {
		// The kernel names a group by its number (iommu_group_alloc: "%d").
		if id, err := strconv.Atoi(e.Name); err == nil && id >= 0 && strconv.Itoa(id) == e.Name {
			groups = append(groups, IOMMUGroup{ID: id, Type: IOMMUNotRead})
		}
	}
	slices.SortFunc(groups, func(a, b IOMMUGroup) int { return a.ID - b.ID })
	return groups, fsys.IOMMUTypes(groups, typed)
}

// IOMMUTypes reads the type attribute of each of groups that typed holds (every one
// when typed is nil) into its Type, as IOMMUGroups does. A node has a group per
// function or more, and p2pcheck judges the types of a few: those of the devices of
// interest (node.Load).
//
// The groups directory is opened once and each group below it, so that a type costs
// the open and read of one name, not a walk of its whole path.
func (fsys FS) IOMMUTypes(groups []IOMMUGroup, typed func(id int) bool) error {
	if !slices.ContainsFunc(groups, func(g IOMMUGroup) bool { return typed == nil || typed(g.ID) }) {
		return nil
	}
	dir, err := fsys.r.Sub(iommuGroups)
	if err != nil {
		return hostfs.PathError("open", iommuGroups, err)
	}
	defer dir.Close()
	var errs []error
	buf := make([]byte, attrLimit+1)
	for i := range groups {
		g := &groups[i]
		if typed != nil && !typed(g.ID) {
			continue
		}
		id := strconv.Itoa(g.ID)
		g.Type = IOMMUUnknown
		b, err := readGroupType(dir, id, buf)
		if ok, err := hostfs.Optional(err); err != nil {
			errs = append(errs, err)
		} else if ok {
			if g.Type, err = parseIOMMUDomainType(b); err != nil {
				errs = append(errs, hostfs.PathError("parse", join(iommuGroups, id, "type"), err))
			}
		}
	}
	return errors.Join(errs...)
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
