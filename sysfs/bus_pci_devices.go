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

	"github.com/p2pkit/p2pkit/hostfs"
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
// On a mounted sysfs every attribute costs one open, one read and a close (hostfs
// looks at a file's type only off sysfs), and a function's directory is not listed
// (see deviceDir). Functions are read in directory order by a few goroutines, with
// the directories from /sys/devices down kept open, so each is opened once,
// relative to its parent. What the kernel derives from another function
// is taken from it: a VF's IDs from its PF (virtFnIDs), local_cpulist from another
// function of the same NUMA node (localCPUs).
func (fsys FS) PCIRecords() ([]pcie.Record, error) {
	bus, err := fsys.r.Sub(busPCIDevices)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoSysfs, hostfs.PathError("open", busPCIDevices, err))
	}
	defer bus.Close()
	names, err := bus.Names(".")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoSysfs, hostfs.PathError("readdir", busPCIDevices, err))
	}
	fns := make([]function, 0, min(len(names), fsys.r.Budget().Functions+1))
	var canonical [len("0000:00:00.0")]byte
	for _, name := range names {
		a, err := pcie.ParseAddress(name)
		if err != nil || string(a.AppendText(canonical[:0])) != name {
			continue // not a function: sysfs names them canonically
		}
		if len(fns) == fsys.r.Budget().Functions {
			return nil, hostfs.PathError("readdir", busPCIDevices, overBudget("Functions", int64(fsys.r.Budget().Functions), "PCI functions"))
		}
		fns = append(fns, function{rec: pcie.Record{Address: a}, name: name})
	}
	slices.SortFunc(fns, func(x, y function) int { return x.rec.Address.Compare(y.rec.Address) })
	parallel(len(fns), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			resolveFunction(bus, &fns[i], fsys.r.Budget().PCIDepth)
		}
	})
	if err := budgetError(fns); err != nil {
		return nil, err
	}
	// Directory order puts every bridge before the functions below it; each worker
	// takes a contiguous run of it, so the directories it keeps open are shared by
	// the functions it reads.
	byDir := make([]*function, len(fns))
	for i := range fns {
		byDir[i] = &fns[i]
	}
	slices.SortFunc(byDir, func(x, y *function) int { return strings.Compare(x.dir, y.dir) })
	parallel(len(byDir), func(lo, hi int) {
		r := reader{walker: hostfs.NewWalker(fsys.r), buf: make([]byte, max(attrLimit, configLimit)+1), live: fsys.r.Live(), cpus: map[int]string{}}
		defer r.walker.Close()
		for _, f := range byDir[lo:hi] {
			if f.dir != "" {
				r.read(f)
			}
		}
	})
	fsys.virtFnIDs(fns)
	if err := budgetError(fns); err != nil {
		return nil, err
	}
	recs := make([]pcie.Record, len(fns))
	for i := range fns {
		recs[i] = fns[i].rec
	}
	return recs, nil
}

// budgetError returns the first error of fns that went past a budget: it stops the
// whole read, where any other error degrades only its own function.
func budgetError(fns []function) error {
	for i := range fns {
		if err := fns[i].rec.Err; errors.Is(err, hostfs.ErrBudget) {
			return fmt.Errorf("sysfs: %s: %w", fns[i].rec.Address, err)
		}
	}
	return nil
}

// resolveFunction resolves the /sys/bus/pci/devices link of f, listed in bus, to its
// directory below /sys/devices. A directory with more than maxDepth bridges above
// the function is a budget error (see Budget.PCIDepth).
func resolveFunction(bus hostfs.Root, f *function, maxDepth int) {
	link := join(busPCIDevices, f.name)
	switch target, err := bus.ReadLink(f.name); {
	case errors.Is(err, hostfs.ErrNotLink):
		f.dir = link // a plain directory, as in a hand-made hostfs.Root
		f.rec.Err = hostfs.PathError("readlink", link, fmt.Errorf("%w: want a link into /sys/devices", err))
	case err != nil:
		f.rec.Err = hostfs.PathError("readlink", link, err)
	default:
		f.dir, f.rec.Err = hostfs.ResolveLink(link, target)
		if rel, ok := strings.CutPrefix(f.dir, sysDevices+"/"); ok {
			f.rec.Path = rel
			// pciDDDD:BB, the bridges, the function: every element past two
			// is a bridge (or a device between them, which only shortens it).
			if strings.Count(rel, "/")-1 > maxDepth {
				f.rec.Err = hostfs.PathError("readlink", link, overBudget("PCIDepth", int64(maxDepth), "bridges above a function"))
			}
		} else if f.rec.Err == nil {
			f.rec.Err = hostfs.PathError("readlink", link, fmt.Errorf("target %q is not below /sys/devices", target))
		}
	}
}

// parallel splits [0, n) into contiguous runs and calls f on each from its own
// goroutine, one per CPU and per few dozen items at most.
func parallel(n int, f func(lo, hi int)) {
	workers := max(1, min(runtime.GOMAXPROCS(0), maxWorkers, (n+functionsPerWorker-1)/functionsPerWorker))
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() { f(i*n/workers, (i+1)*n/workers) })
	}
	wg.Wait()
}

// function is one PCI function as PCIRecords reads it.
type function struct {
	rec  pcie.Record
	name string // its entry in /sys/bus/pci/devices: the canonical address
	dir  string // root-relative directory, once resolved
	// idsFromPF is set on a virtual function whose IDs are to be taken from its
	// physical function once every function is read (see virtFnIDs).
	idsFromPF bool
	// sriov is the function's decoded SR-IOV capability, nil when it has none.
	sriov *pcie.SRIOVCap
}

// virtFnIDs fills the vendor and device IDs of the virtual functions in fns, sorted
// by address, as the kernel sets them when it adds a VF (drivers/pci/iov.c
// pci_iov_add_virtfn): the vendor is the PF's, the device the VF Device ID of the PF's
// SR-IOV capability. A VF whose PF or capability was not read (config space past 64
// bytes needs root) gets them from its own vendor and device attributes instead.
func (fsys FS) virtFnIDs(fns []function) {
	for i := range fns {
		vf := &fns[i]
		if !vf.idsFromPF {
			continue
		}
		if pf := vf.rec.PhysFn; pf != nil {
			j, ok := slices.BinarySearchFunc(fns, *pf, func(f function, a pcie.Address) int { return f.rec.Address.Compare(a) })
			if ok && fns[j].sriov != nil && fns[j].rec.Vendor != 0 {
				vf.rec.Vendor, vf.rec.Device = fns[j].rec.Vendor, fns[j].sriov.VFDevice
				continue
			}
		}
		fsys.readIDs(vf)
	}
}

// readIDs reads the vendor and device attributes of f's directory.
func (fsys FS) readIDs(f *function) {
	t, err := fsys.r.Sub(f.dir)
	if err != nil {
		if f.rec.Err == nil {
			f.rec.Err = hostfs.PathError("open", f.dir, err)
		}
		return
	}
	defer t.Close()
	d := &deviceDir{t: t, name: f.dir, r: &reader{buf: make([]byte, attrLimit+1)}, fn: f, rec: &f.rec}
	d.hex("vendor", 16, true, func(v uint64) { f.rec.Vendor = uint16(v) })
	d.hex("device", 16, true, func(v uint64) { f.rec.Device = uint16(v) })
}

// Goroutines reading functions in parallel. One is worth starting per few dozen
// functions. More than four cost more than they bring: every open and close takes
// the process's file table lock (fs/file.c alloc_fd, file_close_fd), and on the
// 16-CPU H200 host `topo` of the 1,028-function tree took 21 ms with four, 29 with
// two and 41 with eight (make bench-topo).
const (
	maxWorkers         = 4
	functionsPerWorker = 64
)

// reader is what one goroutine of PCIRecords keeps from one function to the next.
type reader struct {
	walker *hostfs.Walker
	buf    []byte // scratch space for one attribute or config file
	live   bool   // a mounted sysfs: read config space sparsely
	// cpus is local_cpulist by NUMA node (see localCPUs).
	cpus map[int]string
}

// read reads the directory of f into f.
func (r *reader) read(f *function) {
	t, err := r.walker.Open(f.dir)
	if err != nil {
		if f.rec.Err == nil {
			f.rec.Err = err
		}
		return
	}
	d := &deviceDir{t: t, name: f.dir, r: r, fn: f, rec: &f.rec}
	d.fill()
}

// deviceDir reads the attributes of one function's directory into rec. The directory
// is not listed: an attribute is read, and one that does not exist is absent. Which
// attributes exist follows from what was read before (the capabilities in config
// space, a bound driver), so few reads are spent on absent ones.
type deviceDir struct {
	t    hostfs.Root
	name string    // root-relative, for errors
	r    *reader   // the goroutine's scratch space and memory of what it read
	fn   *function // what PCIRecords completes after the read
	rec  *pcie.Record
}

// fail keeps the first error.
func (d *deviceDir) fail(err error) {
	if d.rec.Err == nil {
		d.rec.Err = err
	}
}

// attr reads the attribute name, no longer than limit, and hands it to parse. A missing
// attribute is an error when required and otherwise leaves parse uncalled; ok reports
// whether it existed.
func (d *deviceDir) attr(name string, limit int, required bool, parse func([]byte) error) (ok bool) {
	buf := d.r.buf[:limit+1]
	n, err := d.t.Read(name, buf, false)
	if !required && errors.Is(err, fs.ErrNotExist) {
		return false
	}
	b, err := hostfs.Bounded(buf, n, err, name, d.name)
	if err != nil {
		d.fail(err)
		return false
	}
	if err := parse(b); err != nil {
		d.fail(hostfs.PathError("parse", join(d.name, name), err))
	}
	return true
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
	target, err := d.t.ReadLink(name)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			d.fail(hostfs.PathError("readlink", join(d.name, name), err))
		}
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
		d.fail(hostfs.PathError("readlink", join(d.name, name), err))
		return pcie.Address{}, false
	}
	return a, true
}

// list lists the directory name (net, infiniband, nvme), nil when it is absent.
func (d *deviceDir) list(name string) []string {
	names, err := d.t.Names(name)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			d.fail(hostfs.PathError("readdir", join(d.name, name), err))
		}
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
	if !d.r.live {
		// A regular file returns less than asked only at its end, so one read of
		// one byte more than the limit takes it whole.
		b, err := d.t.ReadBounded("config", d.name, d.r.buf[:configLimit+1], false)
		if err != nil {
			d.fail(err)
			return nil
		}
		d.rec.Config = bytes.Clone(b)
		c, _ := pcie.ParseConfig(d.rec.Config)
		return c
	}
	f, size, err := d.t.OpenReaderAt("config")
	if err != nil {
		d.fail(hostfs.PathError("open", join(d.name, "config"), err))
		return nil
	}
	defer f.Close()
	b, c, err := pcie.ReadConfig(f, int(min(size, configLimit)))
	if b == nil {
		d.fail(hostfs.PathError("read", join(d.name, "config"), err))
		return nil
	}
	d.rec.Config = b
	return c
}

// ids fills the IDs, class and revision. The attributes show the kernel's cached
// copy of the standard header (pci-sysfs.c vendor_show and friends), so when the
// header was read they are taken from it, saving six files per function. The
// exceptions: a VF's vendor and device IDs, which its registers read as 0xffff, come
// from the PF's SR-IOV capability as the kernel's do (virtFnIDs) when extended config
// space is readable, else from the VF's attributes; a bridge's subsystem IDs, which
// the kernel reads from its SSVID capability, and everything when the header is
// missing or all zeros, come from the attributes.
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
	switch {
	case c.Vendor == 0xffff && r.PhysFn != nil && c.ExtCapsKnown:
		// Read with the same privilege as this VF's, the PF's SR-IOV capability
		// is readable too.
		d.fn.idsFromPF = true
	case c.Vendor == 0xffff:
		d.hex("vendor", 16, true, func(v uint64) { r.Vendor = uint16(v) })
		d.hex("device", 16, true, func(v uint64) { r.Device = uint16(v) })
	default:
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

// aer reads the AER error totals. The kernel shows them (Linux 5.8+) only for a
// function with an AER capability (drivers/pci/pcie/aer.c pci_aer_init allocates
// aer_stats only then; aer_stats_attrs_are_visible), so they are not looked for when
// extended config space was read and has none.
func (d *deviceDir) aer(c *pcie.Config) {
	if c != nil && c.ExtCapsKnown && !c.AER {
		return
	}
	var counts pcie.AERCounts
	for _, a := range []struct {
		name, key string
		v         *uint64
	}{
		{"aer_dev_correctable", "TOTAL_ERR_COR", &counts.Correctable},
		{"aer_dev_nonfatal", "TOTAL_ERR_NONFATAL", &counts.NonFatal},
		{"aer_dev_fatal", "TOTAL_ERR_FATAL", &counts.Fatal},
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
	d.rec.AER = &counts
}

func (d *deviceDir) fill() {
	r := d.rec
	c := d.config()
	if c != nil {
		d.fn.sriov = c.SRIOV
	}
	if a, ok := d.linkedAddress("physfn"); ok {
		r.PhysFn = &a
	}
	d.ids(c)
	if target, ok := d.link("driver"); ok {
		r.Driver = path.Base(target)
	}
	if target, ok := d.link("iommu_group"); ok {
		g, err := strconv.Atoi(path.Base(target))
		if err != nil || g < 0 {
			d.fail(hostfs.PathError("readlink", join(d.name, "iommu_group"), fmt.Errorf("target %q is not a group number", target)))
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
	d.localCPUs()
	// The link attributes read LNKSTA and LNKCAP again (pci-sysfs.c
	// current_link_speed_show); skip them when the capability was decoded.
	if c == nil || c.Express == nil || !c.Express.HasLink {
		d.linkAttrs("current", &r.CurrentLink)
		d.linkAttrs("max", &r.MaxLink)
	}
	d.attr("resource", attrLimit, false, func(b []byte) (err error) {
		r.Resources, r.ResourcesUnread, err = parseResource(b)
		return err
	})
	d.sriov(c)
	d.aer(c)
	d.vpd()
	// The p2pmem group and the class devices below a function are registered by
	// the driver bound to it and go away with it (pci_p2pdma_add_resource is a
	// driver's call and devres-managed; net, infiniband and nvme devices have the
	// function as parent): without a driver there are none to look for. NVMe
	// controllers below a PCI function come from one driver, "nvme"
	// (drivers/nvme/host/pci.c nvme_probe, nvme_init_ctrl).
	if r.Driver != "" {
		d.p2pmem()
		r.NetDevs = d.list("net")
		r.RDMADevs = d.list("infiniband")
	}
	if r.Driver == "nvme" {
		r.NVMeDevs = d.list("nvme")
	}
}

// vendorNVIDIANetworking is the PCI vendor of ConnectX NICs and their Data Direct
// DMA functions (Mellanox, 0x15b3).
const vendorNVIDIANetworking = 0x15b3

// vpd reads the vpd attribute of NVIDIA networking functions only: their VPD tells
// which NIC a Data Direct DMA function belongs to and which NICs form one board
// (rdma-core's kernel-boot/rdma_topo matches them by the V3 and SN keywords).
// Reading VPD is slow and has hung some devices, so no other function's is read.
// The attribute is readable by root only (pci-sysfs.c, mode 0600); unreadable or
// absent, the record has none.
func (d *deviceDir) vpd() {
	if d.rec.Vendor != vendorNVIDIANetworking {
		return
	}
	b, err := d.t.ReadFile("vpd", pcie.MaxVPDSize)
	switch {
	case err == nil && len(b) > 0:
		d.rec.VPD = b
	case err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission):
		d.fail(hostfs.PathError("read", join(d.name, "vpd"), err))
	}
}

// localCPUs reads local_cpulist. Where numa_node exists the kernel has CONFIG_NUMA,
// and local_cpulist is then a function of the node alone: the online CPUs of the node,
// or all online CPUs for -1 (pci-sysfs.c pci_dev_show_local_cpu). So it is read once
// per node and reused for the other functions of that node.
func (d *deviceDir) localCPUs() {
	r := d.rec
	if r.NUMANode != nil {
		if s, ok := d.r.cpus[*r.NUMANode]; ok {
			r.LocalCPUList = s
			return
		}
	}
	d.attr("local_cpulist", attrLimit, false, func(b []byte) error {
		r.LocalCPUList = attrString(b)
		if r.NUMANode != nil {
			d.r.cpus[*r.NUMANode] = r.LocalCPUList
		}
		return nil
	})
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

// sriov reads sriov_totalvfs and sriov_numvfs of a physical function
// (drivers/pci/iov.c sriov_pf_dev_attrs), then its virtfnN links. The attributes
// exist only on a function with an SR-IOV capability (sriov_init), so they are not
// looked for when extended config space was read and has none. The kernel links VFs
// 0 to NumVFs-1 (pci_iov_add_virtfn, pci_iov_sysfs_link), so the links are read in N
// order up to the first that is absent.
func (d *deviceDir) sriov(c *pcie.Config) {
	if c != nil && c.ExtCapsKnown && c.SRIOV == nil {
		return
	}
	var counts pcie.SRIOVCounts
	if !d.attr("sriov_totalvfs", attrLimit, false, func(b []byte) error {
		v, err := parseDecimal(b)
		counts.TotalVFs = int(min(v, 1<<16))
		return err
	}) {
		return
	}
	d.attr("sriov_numvfs", attrLimit, true, func(b []byte) error {
		v, err := parseDecimal(b)
		counts.NumVFs = int(min(v, 1<<16))
		return err
	})
	d.rec.SRIOV = &counts
	for n := 0; n < 1<<16; n++ {
		a, ok := d.linkedAddress("virtfn" + strconv.Itoa(n))
		if !ok {
			break
		}
		d.rec.VirtFns = append(d.rec.VirtFns, a)
	}
}

// p2pmem reads the p2pmem attribute group of a P2PDMA provider (drivers/pci/p2pdma.c
// p2pmem_group; Documentation/ABI/testing/sysfs-bus-pci). p2pmem/allocate is never
// read: only its presence is recorded.
func (d *deviceDir) p2pmem() {
	t, err := d.t.Sub("p2pmem")
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	name := join(d.name, "p2pmem")
	if err != nil {
		d.fail(hostfs.PathError("open", name, err))
		return
	}
	defer t.Close()
	names, err := t.Names(".")
	if err != nil {
		d.fail(hostfs.PathError("readdir", name, err))
		return
	}
	g := &deviceDir{t: t, name: name, r: d.r, rec: d.rec}
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
	p.Allocate = slices.Contains(names, "allocate")
	d.rec.P2PMem = &p
}
