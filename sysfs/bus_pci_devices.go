package sysfs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

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
//
// Every attribute costs one open and one read; nothing is stat'ed. Functions are read
// in directory order, with the directories from /sys/devices down kept open, so each
// is opened once, relative to its parent.
func (fsys FS) PCIRecords() ([]pcie.Record, error) {
	bus, err := fsys.t.sub(busPCIDevices)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoSysfs, pathErr("open", busPCIDevices, err))
	}
	defer bus.close()
	names, err := bus.names(".")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoSysfs, pathErr("readdir", busPCIDevices, err))
	}
	type function struct {
		rec pcie.Record
		dir string // root-relative directory, once resolved
	}
	fns := make([]function, 0, len(names))
	for _, name := range names {
		a, err := pcie.ParseAddress(name)
		if err != nil || a.String() != name {
			continue // not a function: sysfs names them canonically
		}
		f := function{rec: pcie.Record{Address: a}}
		link := join(busPCIDevices, name)
		switch target, err := bus.readLink(name); {
		case errors.Is(err, errNotLink):
			f.dir = link // a plain directory, as in a hand-made tree
			f.rec.Err = pathErr("readlink", link, fmt.Errorf("%w: want a link into /sys/devices", err))
		case err != nil:
			f.rec.Err = pathErr("readlink", link, err)
		default:
			f.dir, f.rec.Err = resolveLexical(link, target)
			if rel, ok := strings.CutPrefix(f.dir, sysDevices+"/"); ok {
				f.rec.Path = rel
			} else if f.rec.Err == nil {
				f.rec.Err = pathErr("readlink", link, fmt.Errorf("target %q is not below /sys/devices", target))
			}
		}
		fns = append(fns, f)
	}
	// Directory order puts every bridge before the functions below it; each worker
	// takes a contiguous run of it, so the directories it keeps open are shared by
	// the functions it reads.
	slices.SortFunc(fns, func(x, y function) int { return strings.Compare(x.dir, y.dir) })
	workers := min(runtime.GOMAXPROCS(0), maxWorkers, (len(fns)+functionsPerWorker-1)/functionsPerWorker)
	var wg sync.WaitGroup
	for i := range workers {
		chunk := fns[i*len(fns)/workers : (i+1)*len(fns)/workers]
		wg.Go(func() {
			w := dirWalker{root: fsys.t}
			defer w.close()
			buf := make([]byte, max(attrLimit, configLimit)+1)
			for j := range chunk {
				if chunk[j].dir != "" {
					readFunction(&w, chunk[j].dir, buf, fsys.live, &chunk[j].rec)
				}
			}
		})
	}
	wg.Wait()
	recs := make([]pcie.Record, len(fns))
	for i := range fns {
		recs[i] = fns[i].rec
	}
	slices.SortFunc(recs, func(x, y pcie.Record) int { return x.Address.Compare(y.Address) })
	return recs, nil
}

// Workers reading functions in parallel. One is worth starting per few dozen
// functions; on a 32-CPU H200 host more than four brought little (BenchmarkPCIRecords).
const (
	maxWorkers         = 8
	functionsPerWorker = 64
)

// readFunction reads the function directory dir into r, using buf as scratch space.
func readFunction(w *dirWalker, dir string, buf []byte, live bool, r *pcie.Record) {
	t, err := w.open(dir)
	if err != nil {
		if r.Err == nil {
			r.Err = err
		}
		return
	}
	names, err := t.names(".")
	if err != nil {
		if r.Err == nil {
			r.Err = pathErr("readdir", dir, err)
		}
		return
	}
	d := &deviceDir{t: t, name: dir, names: names, buf: buf, live: live, rec: r}
	d.fill()
}

// dirWalker opens directories one element at a time, keeping the chain from the root
// to the last one open, so that walking a tree in sorted order opens each directory
// once.
type dirWalker struct {
	root  tree
	stack []openDir // each the parent of the next
}

type openDir struct {
	name string // root-relative
	t    tree
}

// open returns the directory name, opened below the deepest open ancestor. The walker
// owns it.
func (w *dirWalker) open(name string) (tree, error) {
	for len(w.stack) > 0 {
		top := w.stack[len(w.stack)-1]
		if top.name == name {
			return top.t, nil
		}
		if strings.HasPrefix(name, top.name+"/") {
			break
		}
		top.t.close()
		w.stack = w.stack[:len(w.stack)-1]
	}
	parent, prefix, rest := w.root, "", name
	if len(w.stack) > 0 {
		top := w.stack[len(w.stack)-1]
		parent, prefix, rest = top.t, top.name, name[len(top.name)+1:]
	}
	for _, el := range strings.Split(rest, "/") {
		prefix = join(prefix, el)
		t, err := parent.sub(el)
		if err != nil {
			return nil, pathErr("open", prefix, err)
		}
		w.stack = append(w.stack, openDir{name: prefix, t: t})
		parent = t
	}
	return parent, nil
}

func (w *dirWalker) close() {
	for _, d := range w.stack {
		d.t.close()
	}
	w.stack = nil
}

// deviceDir reads the attributes of one function's directory into rec. The listing
// made first says which attributes exist, so no read is spent on an absent one.
type deviceDir struct {
	t     tree
	name  string   // root-relative, for errors
	names []string // the directory's entries, sorted
	buf   []byte
	live  bool // a mounted sysfs: read config space sparsely
	rec   *pcie.Record
}

// fail keeps the first error.
func (d *deviceDir) fail(err error) {
	if d.rec.Err == nil {
		d.rec.Err = err
	}
}

// has reports whether the directory lists name.
func (d *deviceDir) has(name string) bool {
	_, ok := slices.BinarySearch(d.names, name)
	return ok
}

// attr reads the attribute name, no longer than limit, and hands it to parse. A missing
// attribute is an error when required and otherwise leaves parse uncalled.
func (d *deviceDir) attr(name string, limit int, required bool, parse func([]byte) error) {
	if !d.has(name) {
		if required {
			d.fail(pathErr("read", join(d.name, name), fs.ErrNotExist))
		}
		return
	}
	b, err := readBounded(d.t, name, d.name, d.buf[:limit+1], false)
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

// link reads the link name; ok is false when it is absent. One that is not a link is
// an error.
func (d *deviceDir) link(name string) (target string, ok bool) {
	if !d.has(name) {
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

// list lists the directory name (net, infiniband, nvme), nil when it is absent.
func (d *deviceDir) list(name string) []string {
	if !d.has(name) {
		return nil
	}
	names, err := d.t.names(name)
	if err != nil {
		d.fail(pathErr("readdir", join(d.name, name), err))
		return nil
	}
	return names
}

// config reads the config file. On a mounted sysfs it goes through pcie.ReadConfig:
// only the registers the decoder uses, since every register read is a
// configuration cycle (and, in a VM, an exit to the hypervisor). A copy (a snapshot,
// an unpacked tree) is read whole, in one read. Either way the read stops where the
// kernel stopped: 64 bytes for a reader without CAP_SYS_ADMIN (pci-sysfs.c
// pci_read_config). It returns the decoded space, nil when there is none; decoding
// errors are left to pcie.NewTopology, which reports them against the device.
func (d *deviceDir) config() *pcie.Config {
	name := join(d.name, "config")
	if !d.has("config") {
		d.fail(pathErr("read", name, fs.ErrNotExist))
		return nil
	}
	if !d.live {
		b, err := readBounded(d.t, "config", d.name, d.buf[:configLimit+1], true)
		if err != nil {
			d.fail(err)
			return nil
		}
		d.rec.Config = bytes.Clone(b)
		c, _ := pcie.ParseConfig(d.rec.Config)
		return c
	}
	f, size, err := d.t.openReaderAt("config")
	if err != nil {
		d.fail(pathErr("open", name, err))
		return nil
	}
	defer f.Close()
	b, c, err := pcie.ReadConfig(f, int(min(size, configLimit)))
	if b == nil {
		d.fail(pathErr("read", name, err))
		return nil
	}
	d.rec.Config = b
	return c
}

// ids fills the IDs, class and revision. The attributes show the kernel's cached
// copy of the standard header (pci-sysfs.c vendor_show and friends), so when the
// header was read they are taken from it, saving six files per function. Three
// exceptions come from sysfs: a VF's vendor and device IDs, which its registers
// read as 0xffff (the kernel takes them from the PF's SR-IOV capability,
// drivers/pci/iov.c); a bridge's subsystem IDs, which the kernel reads from its
// SSVID capability; and everything when the header is missing or all zeros.
func (d *deviceDir) ids(c *pcie.Config) {
	r := d.rec
	le := binary.LittleEndian
	if c == nil || c.Vendor == 0 {
		d.hex("vendor", 16, true, func(v uint64) { r.Vendor = uint16(v) })
		d.hex("device", 16, true, func(v uint64) { r.Device = uint16(v) })
		d.hex("revision", 8, false, func(v uint64) { r.Revision = uint8(v) })
		d.attr("class", attrLimit, true, func(b []byte) (err error) {
			r.Class, err = parseClass(b)
			return err
		})
		d.subsystem()
		return
	}
	r.Class, r.Revision = c.Class, c.Revision
	if c.Vendor == 0xffff {
		d.hex("vendor", 16, true, func(v uint64) { r.Vendor = uint16(v) })
		d.hex("device", 16, true, func(v uint64) { r.Device = uint16(v) })
	} else {
		r.Vendor, r.Device = c.Vendor, c.Device
	}
	if c.HeaderType != 0 {
		d.subsystem()
		return
	}
	r.SubVendor, r.SubDevice = le.Uint16(r.Config[0x2c:]), le.Uint16(r.Config[0x2e:])
}

// subsystem reads the subsystem ID attributes.
func (d *deviceDir) subsystem() {
	r := d.rec
	d.hex("subsystem_vendor", 16, false, func(v uint64) { r.SubVendor = uint16(v) })
	d.hex("subsystem_device", 16, false, func(v uint64) { r.SubDevice = uint16(v) })
}

// aer reads the AER error totals, present on functions with AER when the kernel
// handles it (Linux 5.8+).
func (d *deviceDir) aer() {
	if !d.has("aer_dev_correctable") {
		return
	}
	var c pcie.AERCounts
	for _, a := range []struct {
		name, key string
		v         *uint64
	}{
		{"aer_dev_correctable", "TOTAL_ERR_COR", &c.Correctable},
		{"aer_dev_nonfatal", "TOTAL_ERR_NONFATAL", &c.NonFatal},
		{"aer_dev_fatal", "TOTAL_ERR_FATAL", &c.Fatal},
	} {
		ok := false
		d.attr(a.name, aerLimit, false, func(b []byte) (err error) {
			*a.v, err = parseAERTotal(b, a.key)
			ok = err == nil
			return err
		})
		if !ok {
			return
		}
	}
	d.rec.AER = &c
}

func (d *deviceDir) fill() {
	r := d.rec
	c := d.config()
	d.ids(c)
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
	// The link attributes read LNKSTA and LNKCAP again (pci-sysfs.c
	// current_link_speed_show); skip them when the capability was decoded.
	if c == nil || c.Express == nil || !c.Express.HasLink {
		d.linkAttrs("current", &r.CurrentLink)
		d.linkAttrs("max", &r.MaxLink)
	}
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
	d.aer()
	r.NetDevs = d.list("net")
	r.RDMADevs = d.list("infiniband")
	r.NVMeDevs = d.list("nvme")
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
	for _, name := range d.names {
		num, ok := strings.CutPrefix(name, "virtfn")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 {
			continue
		}
		vfs = append(vfs, vf{n, name})
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
	if !d.has("sriov_totalvfs") {
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
	if !d.has("p2pmem") {
		return
	}
	name := join(d.name, "p2pmem")
	t, err := d.t.sub("p2pmem")
	if err != nil {
		d.fail(pathErr("open", name, err))
		return
	}
	defer t.close()
	names, err := t.names(".")
	if err != nil {
		d.fail(pathErr("readdir", name, err))
		return
	}
	g := &deviceDir{t: t, name: name, names: names, buf: d.buf, rec: d.rec}
	var p pcie.P2PMem
	g.attr("size", attrLimit, true, func(b []byte) (err error) {
		p.Size, err = parseDecimal(b)
		return err
	})
	g.attr("available", attrLimit, true, func(b []byte) (err error) {
		p.Available, err = parseDecimal(b)
		return err
	})
	g.attr("published", attrLimit, true, func(b []byte) (err error) {
		p.Published, err = parseBool(b)
		return err
	})
	p.Allocate = g.has("allocate")
	d.rec.P2PMem = &p
}
