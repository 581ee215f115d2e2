package sysfs

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/pcie"
)

const (
	busPCIDevices = "sys/bus/pci/devices"
	sysDevices    = "sys/devices"
)

// PCIRecords reads every PCI function of /sys/bus/pci/devices into a [pcie.Record],
// sorted by address. See https://docs.kernel.org/PCI/sysfs-pci.html and
// Documentation/ABI/testing/sysfs-bus-pci.
//
// Each function's link is resolved inside the root to its directory below
// /sys/devices, whose path becomes Record.Path. Attributes the directory lacks are left
// at their zero value or nil. A function that cannot be read completely keeps what was
// read and gets the first error in Record.Err: one bad function never empties the
// result. The error is non-nil, wrapping [ErrNoSysfs], only when /sys/bus/pci/devices
// itself cannot be listed.
func (fsys FS) PCIRecords() ([]pcie.Record, error) {
	ents, err := fsys.t.readDir(busPCIDevices)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoSysfs, pathErr("readdir", busPCIDevices, err))
	}
	buf := make([]byte, max(attrLimit, configLimit)+1)
	recs := make([]pcie.Record, 0, len(ents))
	for _, e := range ents {
		a, err := pcie.ParseAddress(e.name)
		if err != nil || a.String() != e.name {
			continue // not a function: sysfs names them canonically
		}
		recs = append(recs, fsys.pciRecord(a, e, buf))
	}
	slices.SortFunc(recs, func(x, y pcie.Record) int { return x.Address.Compare(y.Address) })
	return recs, nil
}

// pciRecord reads the function whose /sys/bus/pci/devices entry is e, using buf as
// scratch space.
func (fsys FS) pciRecord(a pcie.Address, e dirEntry, buf []byte) pcie.Record {
	r := pcie.Record{Address: a}
	link := join(busPCIDevices, e.name)
	dir := link
	if e.typ&fs.ModeSymlink != 0 {
		var err error
		if dir, err = fsys.linkTarget(link); err != nil {
			r.Err = err
			return r
		}
	}
	if rel, ok := strings.CutPrefix(dir, sysDevices+"/"); ok {
		r.Path = rel
	} else {
		r.Err = pathErr("readlink", link, fmt.Errorf("not a link into /sys/devices: %q", dir))
	}
	t, err := fsys.t.sub(dir)
	if err != nil {
		r.Err = pathErr("open", dir, err)
		return r
	}
	defer t.close()
	ents, err := t.readDir(".")
	if err != nil {
		r.Err = pathErr("readdir", dir, err)
		return r
	}
	d := &deviceDir{t: t, name: dir, ents: ents, buf: buf, rec: &r}
	d.fill()
	return r
}

// deviceDir reads the attributes of one function's directory into rec. The listing
// made first says which attributes exist, so no read is spent on an absent one.
type deviceDir struct {
	t    tree
	name string // root-relative, for errors
	ents []dirEntry
	buf  []byte
	rec  *pcie.Record
}

// fail keeps the first error.
func (d *deviceDir) fail(err error) {
	if d.rec.Err == nil {
		d.rec.Err = err
	}
}

// has reports whether the directory lists name, and its type.
func (d *deviceDir) has(name string) (fs.FileMode, bool) {
	i, ok := slices.BinarySearchFunc(d.ents, name, func(e dirEntry, n string) int { return strings.Compare(e.name, n) })
	if !ok {
		return 0, false
	}
	return d.ents[i].typ, true
}

// attr reads the attribute name, no longer than limit, and hands it to parse. A missing
// attribute is an error when required and otherwise leaves parse uncalled.
func (d *deviceDir) attr(name string, limit int, required bool, parse func([]byte) error) {
	if _, ok := d.has(name); !ok {
		if required {
			d.fail(pathErr("read", join(d.name, name), fs.ErrNotExist))
		}
		return
	}
	b, err := readBounded(d.t, name, d.name, d.buf[:limit+1])
	if err != nil {
		d.fail(err)
		return
	}
	if err := parse(b); err != nil {
		d.fail(pathErr("parse", join(d.name, name), err))
	}
}

// hex reads a hexadecimal attribute of at most bitSize bits and hands it to set.
func (d *deviceDir) hex(name string, bitSize int, required bool, set func(uint64)) {
	d.attr(name, attrLimit, required, func(b []byte) error {
		v, err := parseHex(b, bitSize)
		if err == nil {
			set(v)
		}
		return err
	})
}

// link reads the link name; ok is false when it is absent or not a link.
func (d *deviceDir) link(name string) (target string, ok bool) {
	typ, ok := d.has(name)
	if !ok || typ&fs.ModeSymlink == 0 {
		return "", false
	}
	target, err := d.t.readLink(name)
	if err != nil {
		d.fail(pathErr("readlink", join(d.name, name), err))
		return "", false
	}
	return target, true
}

// linkedAddress parses the address a physfn or virtfnN link names.
func (d *deviceDir) linkedAddress(name string) (pcie.Address, bool) {
	target, ok := d.link(name)
	if !ok {
		return pcie.Address{}, false
	}
	a, err := pcie.ParseAddress(path.Base(target))
	if err != nil {
		d.fail(pathErr("readlink", join(d.name, name), err))
		return pcie.Address{}, false
	}
	return a, true
}

// names lists the directory name (net, infiniband, nvme), nil when it is absent.
func (d *deviceDir) names(name string) []string {
	if typ, ok := d.has(name); !ok || !typ.IsDir() {
		return nil
	}
	ents, err := d.t.readDir(name)
	if err != nil {
		d.fail(pathErr("readdir", join(d.name, name), err))
		return nil
	}
	out := make([]string, len(ents))
	for i, e := range ents {
		out[i] = e.name
	}
	return out
}

func (d *deviceDir) fill() {
	r := d.rec
	d.hex("vendor", 16, true, func(v uint64) { r.Vendor = uint16(v) })
	d.hex("device", 16, true, func(v uint64) { r.Device = uint16(v) })
	d.hex("subsystem_vendor", 16, false, func(v uint64) { r.SubVendor = uint16(v) })
	d.hex("subsystem_device", 16, false, func(v uint64) { r.SubDevice = uint16(v) })
	d.hex("revision", 8, false, func(v uint64) { r.Revision = uint8(v) })
	d.attr("class", attrLimit, true, func(b []byte) (err error) {
		r.Class, err = parseClass(b)
		return err
	})
	// The read stops where the kernel stops: 64 bytes for a reader without
	// CAP_SYS_ADMIN (pci-sysfs.c pci_read_config).
	d.attr("config", configLimit, true, func(b []byte) error {
		r.Config = bytes.Clone(b)
		return nil
	})
	if target, ok := d.link("driver"); ok {
		r.Driver = path.Base(target)
	}
	if target, ok := d.link("iommu_group"); ok {
		g, err := strconv.Atoi(path.Base(target))
		if err != nil || g < 0 {
			d.fail(pathErr("readlink", join(d.name, "iommu_group"), fmt.Errorf("target %q is not a group number", target)))
		} else {
			r.IOMMUGroup = &g
		}
	}
	d.attr("numa_node", attrLimit, false, func(b []byte) error {
		n, err := parseNUMANode(b)
		if err == nil {
			r.NUMANode = &n
		}
		return err
	})
	d.attr("local_cpulist", attrLimit, false, func(b []byte) error {
		r.LocalCPUList = attrString(b)
		return nil
	})
	d.linkAttrs("current", &r.CurrentLink)
	d.linkAttrs("max", &r.MaxLink)
	d.attr("resource", attrLimit, false, func(b []byte) (err error) {
		r.Resources, err = parseResource(b)
		return err
	})
	if a, ok := d.linkedAddress("physfn"); ok {
		r.PhysFn = &a
	}
	d.virtFns()
	d.sriov()
	d.p2pmem()
	r.NetDevs = d.names("net")
	r.RDMADevs = d.names("infiniband")
	r.NVMeDevs = d.names("nvme")
}

// linkAttrs reads <which>_link_speed and <which>_link_width, present on PCI Express
// functions only (pci-sysfs.c pcie_dev_attrs).
func (d *deviceDir) linkAttrs(which string, l *pcie.Link) {
	d.attr(which+"_link_speed", attrLimit, false, func(b []byte) (err error) {
		l.Speed, err = parseLinkSpeed(b)
		return err
	})
	d.attr(which+"_link_width", attrLimit, false, func(b []byte) (err error) {
		l.Width, err = parseLinkWidth(b)
		return err
	})
}

// virtFns reads the virtfnN links of a physical function (drivers/pci/iov.c
// pci_iov_sysfs_link), in N order.
func (d *deviceDir) virtFns() {
	type vf struct {
		n    int
		name string
	}
	var vfs []vf
	for _, e := range d.ents {
		num, ok := strings.CutPrefix(e.name, "virtfn")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 {
			continue
		}
		vfs = append(vfs, vf{n, e.name})
	}
	slices.SortFunc(vfs, func(a, b vf) int { return a.n - b.n })
	for _, v := range vfs {
		if a, ok := d.linkedAddress(v.name); ok {
			d.rec.VirtFns = append(d.rec.VirtFns, a)
		}
	}
}

// sriov reads sriov_totalvfs and sriov_numvfs of a physical function
// (drivers/pci/iov.c sriov_pf_dev_attrs).
func (d *deviceDir) sriov() {
	if _, ok := d.has("sriov_totalvfs"); !ok {
		return
	}
	var c pcie.SRIOVCounts
	d.attr("sriov_totalvfs", attrLimit, true, func(b []byte) error {
		v, err := parseDecimal(b)
		c.TotalVFs = int(min(v, 1<<16))
		return err
	})
	d.attr("sriov_numvfs", attrLimit, true, func(b []byte) error {
		v, err := parseDecimal(b)
		c.NumVFs = int(min(v, 1<<16))
		return err
	})
	d.rec.SRIOV = &c
}

// p2pmem reads the p2pmem attribute group of a P2PDMA provider (drivers/pci/p2pdma.c
// p2pmem_group; Documentation/ABI/testing/sysfs-bus-pci). p2pmem/allocate is never
// read: only its presence is recorded.
func (d *deviceDir) p2pmem() {
	if typ, ok := d.has("p2pmem"); !ok || !typ.IsDir() {
		return
	}
	ents, err := d.t.readDir("p2pmem")
	if err != nil {
		d.fail(pathErr("readdir", join(d.name, "p2pmem"), err))
		return
	}
	sub := &deviceDir{t: d.t, name: d.name, ents: nil, buf: d.buf, rec: d.rec}
	for _, e := range ents {
		sub.ents = append(sub.ents, dirEntry{name: "p2pmem/" + e.name, typ: e.typ})
	}
	var p pcie.P2PMem
	sub.attr("p2pmem/size", attrLimit, true, func(b []byte) (err error) {
		p.Size, err = parseDecimal(b)
		return err
	})
	sub.attr("p2pmem/available", attrLimit, true, func(b []byte) (err error) {
		p.Available, err = parseDecimal(b)
		return err
	})
	sub.attr("p2pmem/published", attrLimit, true, func(b []byte) (err error) {
		p.Published, err = parseBool(b)
		return err
	})
	_, p.Allocate = sub.has("p2pmem/allocate")
	d.rec.P2PMem = &p
}
