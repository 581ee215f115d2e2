package snapshot

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/procfs"
)

// Read limits of a capture.
const (
	// captureLimit bounds a sysfs file a capture copies: one page of the largest page
	// size Linux uses (64 KiB on some arm64 and ppc64 kernels).
	captureLimit = 64 << 10
	// attrLimit bounds a sysfs attribute of the platform a capture copies: a show()
	// routine fills at most one page (fs/sysfs/file.c sysfs_kf_seq_show, PAGE_SIZE).
	attrLimit = 4096
	// procLimit bounds a whole /proc or /boot file.
	procLimit = hostfs.MaxFileSize
)

// The sysfs directories a capture walks (Documentation/ABI/testing/sysfs-bus-pci,
// sysfs-kernel-iommu_groups, and MOFED's /sys/kernel/mm/memory_peers).
const (
	busPCIDevices = "sys/bus/pci/devices"
	sysDevices    = "sys/devices"
	iommuGroups   = "sys/kernel/iommu_groups"
	memoryPeers   = "sys/kernel/mm/memory_peers"
)

// join joins root-relative name elements.
func join(elem ...string) string { return path.Join(elem...) }

// Summary says what [Write] wrote.
type Summary struct {
	Members int // tar members written
	// Skipped holds one error, naming the path, per file that exists but could not
	// be read and was left out (a file only root may read, for example).
	Skipped []error
	// Manifest is what the snapshot's manifest member records.
	Manifest Manifest
}

// Options tune [WriteOptions].
type Options struct {
	// NoRedact keeps what identifies the machine or its parts: the Device Serial
	// Number capability's serial, the vpd and serial_number files, the host name.
	NoRedact bool
	// NVML is a JSON document of the NVML facts p2pcheck used on this machine,
	// stored as p2pkit/nvml.json (see [RecordedNVML]); nil stores none. The
	// caller redacts it (GPU UUIDs) unless NoRedact; the manifest lists "gpu_uuid".
	NVML []byte
	// NCCL is a JSON document of the host facts 'p2pcheck nccl' used (see
	// [RecordedNCCL]), NCCLConf the NCCL configuration files it read; with them
	// the capture keeps /sys/class/net and /sys/class/infiniband (see ncclFacts).
	NCCL     []byte
	NCCLConf []string
}

// Write is [WriteOptions] with the default options: redacted, no
// NVML facts.
func Write(src hostfs.Root, w io.Writer) (Summary, error) {
	return WriteOptions(src, w, Options{})
}

// WriteOptions captures what p2pkit reads from src as a gzip'd tar on w, in the
// snapshot format (README, "Capture a snapshot"): members named sys/..., proc/..., dev/... and boot/...
// as on the live system, links kept as links with their relative targets.
//
// For every PCI function it stores the /sys/bus/pci/devices/<bdf> link and, in the
// function's directory and every ancestor directory up to /sys/devices/pciDDDD:BB, the
// readable plain attribute files (config included, as much of it as the caller may
// read), the driver, iommu_group, physfn and virtfnN links, the p2pmem/ attributes and
// the names under net/, infiniband/ and nvme/ (as empty directories). It never reads a
// file that maps or touches device memory or has effects on read: the BAR files
// resource<N> and resource<N>_wc, rom and p2pmem/allocate (stored empty, for its
// presence) are left out or not read, and so are write-only files (remove, rescan,
// reset) and driver_override. The sriov_* attributes are read: their show routines
// only report cached values (drivers/pci/iov.c).
//
// Unless opt.NoRedact is set, the snapshot is redacted (see [Manifest]): vpd and
// serial_number are not read, the serial of every Device Serial Number capability in
// config is zeroed, and the host name (/proc/sys/kernel/hostname) is replaced in
// /proc/cmdline and /proc/version.
//
// It also stores /proc/cpuinfo, cmdline, version, modules and devices,
// /proc/driver/nvidia/{version,params}, /proc/driver/gdrdrv/params, /proc/config.gz
// or else /boot/config-<release>, /sys/kernel/iommu_groups/*/type, the /sys/class/iommu
// links, /sys/kernel/mm/memory_peers/*/version and the /dev/gdrdrv and /dev/nvidia*
// nodes (type, mode and device number only), each when present, and the manifest,
// p2pkit/manifest.json.
//
// A file that cannot be read is left out and listed in the summary; the capture goes
// on. The error is non-nil only when writing to w fails. Output is deterministic:
// members are sorted by name and carry no time stamps.
func WriteOptions(src hostfs.Root, w io.Writer, opt Options) (Summary, error) {
	c := &capture{src: src, members: map[string]*member{}, seen: map[string]bool{}, redact: !opt.NoRedact}
	c.pciFunctions()
	c.procFiles()
	c.platformFiles()
	c.fixState()
	c.devNodes()
	c.ncclFacts(opt)
	c.finish(opt)
	return c.write(w)
}

// member is one tar member to be written.
type member struct {
	typ          byte
	perm         fs.FileMode
	data         []byte
	target       string
	major, minor uint32
}

type capture struct {
	src      hostfs.Root
	members  map[string]*member
	seen     map[string]bool // device directories already captured
	skipped  []error
	redact   bool
	manifest Manifest
	vpdNames map[string]string // pseudonyms of VPD serials, by keyword and value
}

func (c *capture) skip(err error) { c.skipped = append(c.skipped, err) }

// add records m at name and a directory member for each missing parent.
func (c *capture) add(name string, m *member) {
	for d := path.Dir(name); d != "." && c.members[d] == nil; d = path.Dir(d) {
		c.members[d] = &member{typ: tar.TypeDir, perm: 0o755}
	}
	c.members[name] = m
}

// file copies the regular file name, at most limit bytes. An absent file is left out
// silently, as is one nobody may read (write-only attributes).
func (c *capture) file(name string, limit int) {
	fi, err := c.src.Lstat(name)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			c.skip(hostfs.PathError("lstat", name, err))
		}
		return
	}
	if !fi.Mode.IsRegular() {
		c.notRegular(name, fi.Mode)
		return
	}
	if fi.Mode.Perm()&0o444 == 0 {
		return
	}
	b, err := c.src.ReadFile(name, limit)
	if err != nil {
		c.skip(err)
		return
	}
	c.add(name, &member{typ: tar.TypeReg, perm: fi.Mode.Perm(), data: b})
}

// notRegular records name, of mode m, as left out: sysfs and /proc hold only
// regular files, directories and links, so a device node, FIFO or socket where a
// file is expected is a hostile or broken tree's, never opened, and counted.
func (c *capture) notRegular(name string, m fs.FileMode) {
	c.skip(hostfs.PathError("read", name, fmt.Errorf("%w (%s)", hostfs.ErrNotFile, hostfs.FileKind(m))))
}

// link copies the link name with its target as stored.
func (c *capture) link(name string) {
	target, err := c.src.ReadLink(name)
	if err != nil {
		c.skip(hostfs.PathError("readlink", name, err))
		return
	}
	c.add(name, &member{typ: tar.TypeSymlink, perm: 0o777, target: target})
}

// listDir lists the directory name and records it, or records why it could
// not and returns false.
func (c *capture) listDir(name string) ([]hostfs.DirEntry, bool) {
	ents, err := c.src.ReadDir(name)
	if err != nil {
		c.skip(hostfs.PathError("readdir", name, err))
		return nil, false
	}
	c.dir(name)
	return ents, true
}

// dir records the directory name itself.
func (c *capture) dir(name string) {
	if c.members[name] == nil {
		c.add(name, &member{typ: tar.TypeDir, perm: 0o755})
	}
}

func (c *capture) pciFunctions() {
	ents, ok := c.listDir(busPCIDevices)
	if !ok {
		return
	}
	for _, e := range ents {
		link := join(busPCIDevices, e.Name)
		dir := link
		if e.Type&fs.ModeSymlink != 0 {
			c.link(link)
			var err error
			if dir, err = c.src.LinkTarget(link); err != nil {
				c.skip(err)
				continue
			}
		}
		c.deviceDir(dir)
		// Ancestors up to the host bridge directory, /sys/devices/pciDDDD:BB.
		for d := path.Dir(dir); strings.HasPrefix(d, sysDevices+"/"); d = path.Dir(d) {
			c.deviceDir(d)
		}
	}
}

// deviceDir captures one function's or bridge's directory.
func (c *capture) deviceDir(dir string) {
	if c.seen[dir] {
		return
	}
	c.seen[dir] = true
	ents, ok := c.listDir(dir)
	if !ok {
		return
	}
	for _, e := range ents {
		name := join(dir, e.Name)
		switch {
		case e.Type == 0:
			switch {
			case neverRead(e.Name):
			case e.Name == "vpd":
				c.vpd(name, dir)
			case c.redact && identifying(e.Name):
			case e.Name == "config":
				c.config(name)
			default:
				c.file(name, captureLimit)
			}
		case e.Type&fs.ModeSymlink != 0:
			if keptLink(e.Name) {
				c.link(name)
			}
			if e.Name == "driver" {
				c.driverDir(name)
			}
		case e.Type.IsDir():
			switch e.Name {
			case "p2pmem":
				c.p2pmem(name)
			case "net", "infiniband", "nvme":
				c.childNames(name)
			}
		default:
			c.notRegular(name, e.Type)
		}
	}
}

// driverDir records the directory a function's driver link points to
// (sys/bus/pci/drivers/<name>), empty: readers that resolve the link with realpath,
// as lspci does for its driver field (pciutils lib/sysfs.c), need it to exist.
func (c *capture) driverDir(link string) {
	target, err := c.src.LinkTarget(link)
	if err != nil {
		c.skip(err)
		return
	}
	c.dir(target)
}

// neverRead reports the attribute files a capture must not read: BARs mapped through
// sysfs (pci-sysfs.c pci_create_attr: resource<N>, resource<N>_wc), the expansion ROM,
// driver_override and the write-only remove, rescan and reset.
func neverRead(name string) bool {
	switch name {
	case "rom", "driver_override", "remove", "rescan", "reset":
		return true
	}
	if n, ok := strings.CutPrefix(name, "resource"); ok && n != "" {
		n = strings.TrimSuffix(n, "_wc")
		_, err := strconv.Atoi(n)
		return err == nil
	}
	return false
}

// keptLink reports the links of a function's directory that a capture keeps.
func keptLink(name string) bool {
	switch name {
	case "driver", "iommu_group", "physfn":
		return true
	}
	n, ok := strings.CutPrefix(name, "virtfn")
	if !ok {
		return false
	}
	_, err := strconv.Atoi(n)
	return err == nil
}

// p2pmem captures the p2pmem group; allocate is stored empty, never read (reading it
// is meaningless and mapping it allocates device memory).
func (c *capture) p2pmem(dir string) {
	c.dir(dir)
	for _, f := range []string{"size", "available", "published"} {
		c.file(join(dir, f), attrLimit)
	}
	alloc := join(dir, "allocate")
	fi, err := c.src.Lstat(alloc)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			c.skip(hostfs.PathError("lstat", alloc, err))
		}
		return
	}
	c.add(alloc, &member{typ: tar.TypeReg, perm: fi.Mode.Perm()})
}

// childNames records the entries of dir as empty directories.
func (c *capture) childNames(dir string) {
	ents, ok := c.listDir(dir)
	if !ok {
		return
	}
	for _, e := range ents {
		c.dir(join(dir, e.Name))
	}
}

func (c *capture) procFiles() {
	for _, f := range []string{
		"proc/cpuinfo", "proc/cmdline", "proc/version", "proc/modules", "proc/devices",
		"proc/driver/nvidia/version", "proc/driver/nvidia/params",
		"proc/driver/gdrdrv/params", "proc/config.gz",
	} {
		c.file(f, procLimit)
	}
	if c.members["proc/config.gz"] != nil {
		return
	}
	v, err := procfs.New(c.src).KernelVersion()
	if err != nil || strings.Contains(v.Release, "/") {
		return
	}
	c.file("boot/config-"+v.Release, procLimit)
}

func (c *capture) platformFiles() {
	if ents, err := c.src.ReadDir(iommuGroups); err == nil {
		c.dir(iommuGroups)
		for _, e := range ents {
			c.dir(join(iommuGroups, e.Name))
			c.file(join(iommuGroups, e.Name, "type"), attrLimit)
		}
	}
	const classIOMMU = "sys/class/iommu"
	if ents, err := c.src.ReadDir(classIOMMU); err == nil {
		c.dir(classIOMMU)
		for _, e := range ents {
			if e.Type&fs.ModeSymlink != 0 {
				c.link(join(classIOMMU, e.Name))
			} else {
				c.dir(join(classIOMMU, e.Name))
			}
		}
	}
	if ents, err := c.src.ReadDir(memoryPeers); err == nil {
		c.dir(memoryPeers)
		for _, e := range ents {
			c.dir(join(memoryPeers, e.Name))
			c.file(join(memoryPeers, e.Name, "version"), attrLimit)
		}
	}
}

// devNodes records /dev/gdrdrv and /dev/nvidia* by type, mode and number; nothing in
// /dev is ever opened.
func (c *capture) devNodes() {
	ents, err := c.src.ReadDir("dev")
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.Name != "gdrdrv" && !strings.HasPrefix(e.Name, "nvidia") {
			continue
		}
		name := join("dev", e.Name)
		fi, err := c.src.Lstat(name)
		if err != nil {
			c.skip(hostfs.PathError("lstat", name, err))
			continue
		}
		switch {
		case fi.Mode&fs.ModeSymlink != 0:
			c.link(name)
		case fi.Mode&fs.ModeDevice != 0 && fi.HasDev:
			typ := byte(tar.TypeBlock)
			if fi.Mode&fs.ModeCharDevice != 0 {
				typ = tar.TypeChar
			}
			c.add(name, &member{typ: typ, perm: fi.Mode.Perm(), major: fi.Major, minor: fi.Minor})
		}
	}
}

// write emits the members sorted by name, so parents precede their children.
func (c *capture) write(w io.Writer) (Summary, error) {
	sum := Summary{Skipped: c.skipped, Manifest: c.manifest}
	names := make([]string, 0, len(c.members))
	for n := range c.members {
		names = append(names, n)
	}
	slices.Sort(names)
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	epoch := time.Unix(0, 0)
	for _, n := range names {
		m := c.members[n]
		hdr := &tar.Header{
			Typeflag: m.typ,
			Name:     n,
			Mode:     int64(m.perm),
			ModTime:  epoch,
			Linkname: m.target,
			Devmajor: int64(m.major),
			Devminor: int64(m.minor),
			Size:     int64(len(m.data)),
		}
		if m.typ == tar.TypeDir {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return sum, fmt.Errorf("snapshot: %s: %w", n, err)
		}
		if _, err := tw.Write(m.data); err != nil {
			return sum, fmt.Errorf("snapshot: %s: %w", n, err)
		}
		sum.Members++
	}
	if err := tw.Close(); err != nil {
		return sum, fmt.Errorf("snapshot: %w", err)
	}
	if err := zw.Close(); err != nil {
		return sum, fmt.Errorf("snapshot: %w", err)
	}
	return sum, nil
}
