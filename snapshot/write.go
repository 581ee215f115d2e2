package snapshot

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/pcie"
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

// child is join(dir, name) for a clean dir and a name a directory listing gave,
// which holds no slash and is never "." or ".." (getdents(2)), without path.Join's
// cleaning: it was a tenth of a capture's time. Any other name is joined.
func child(dir, name string) string {
	if dir == "" || name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return join(dir, name)
	}
	return dir + "/" + name
}

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
// nodes (type, mode and device number only), each when present, and last the
// manifest, p2pkit/manifest.json.
//
// The archive streams: members are written in the order of the walk (directories
// listed in sorted order, every directory before what it holds), device directories
// read ahead by a few goroutines at most a bounded amount ahead of the writing (see
// readDirs), so memory does not grow with the machine beyond a few bytes per name
// written.
// Output is deterministic: the same tree gives the same bytes, with no time stamps.
//
// A file that cannot be read is left out and listed in the summary; the capture goes
// on. So is a member that [Read] would refuse alone (a name, link target or file
// past its [hostfs.DefaultBudget] limit, a name under a non-directory). The error is
// non-nil when writing to w fails, and when the capture grows past what [Open] reads
// back (DefaultBudget's Members, Data or Bytes): it wraps [hostfs.ErrBudget] and names
// the limit, and what was written is not a snapshot.
func WriteOptions(src hostfs.Root, w io.Writer, opt Options) (Summary, error) {
	return writeBudget(src, w, opt, hostfs.DefaultBudget)
}

// writeBudget is WriteOptions for a reader within b: the one budget both sides of
// a snapshot apply.
func writeBudget(src hostfs.Root, w io.Writer, opt Options, b hostfs.Budget) (Summary, error) {
	c := newCapture(src, w, !opt.NoRedact, b)
	c.hostName()
	c.pciFunctions()
	c.procFiles()
	c.platformFiles()
	c.fixState()
	c.devNodes()
	c.ncclFacts(opt)
	c.finish(opt)
	return c.close()
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
	redact   bool
	host     string // the host name, replaced in hostFiles when redacting
	skipped  []error
	manifest Manifest
	vpdNames map[string]string // pseudonyms of VPD serials, by keyword and value

	// What the archive holds so far, checked against the budget its reader applies.
	budget  hostfs.Budget
	zw      *blockGzip
	tw      *tarWriter      // its n counts the tar stream, as the reader decompresses it
	names   map[uint64]byte // every name written (its FNV-1a hash): its tar type
	nodes   int             // tree nodes the reader makes: the root and every name
	data    int64           // bytes of regular files
	members int
	err     error // the first failure to write or refusal: nothing more is written

	buf []byte // scratch space for one sysfs file
	// rec, when set, makes this a reader's capture (see readDirs): what add and
	// skip are given is recorded there, for the capture proper to replay.
	rec      *[]captureOp
	recBytes int // file data recorded in rec
}

func newCapture(src hostfs.Root, w io.Writer, redact bool, b hostfs.Budget) *capture {
	zw := newBlockGzip(w)
	return &capture{
		src: src, redact: redact, budget: b,
		zw: zw, tw: &tarWriter{w: zw},
		names: map[uint64]byte{}, nodes: 1,
		buf: make([]byte, max(captureLimit, pcie.MaxVPDSize)+1),
	}
}

// nameHash is the 64-bit FNV-1a hash of name: the capture remembers the names it
// wrote by it, 8 bytes each however long the name. Two names of one machine that
// share a hash (odds of about 10⁻⁹ at the reader's limit of names) make the later
// one look written already: it is left out, or its parents are taken as there.
func nameHash(name string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	return h
}

func (c *capture) skip(err error) {
	if c.rec != nil {
		*c.rec = append(*c.rec, captureOp{err: err})
		return
	}
	c.skipped = append(c.skipped, err)
}

// add writes m at name, after a directory member for each parent not written yet.
// It reports whether m was written. A name written before is not written again (a
// directory or link met twice on the walk); a member that the reader would refuse
// alone is left out and listed.
func (c *capture) add(name string, m *member) bool { return c.addEdit(name, m, nil) }

// addEdit is add with m.data passed through edit (nil: none) first.
func (c *capture) addEdit(name string, m *member, edit func(*capture, []byte)) bool {
	if c.rec != nil {
		if m.data != nil {
			m.data = slices.Clone(m.data) // it is the reader's scratch space
			c.recBytes += len(m.data)
		}
		*c.rec = append(*c.rec, captureOp{name: name, m: m, edit: edit})
		return true
	}
	if c.err != nil {
		return false
	}
	if edit != nil {
		edit(c, m.data)
	}
	if err := c.fits(name, m); err != nil {
		c.skip(hostfs.PathError("capture", name, err))
		return false
	}
	h := nameHash(name)
	if _, ok := c.names[h]; ok {
		return false
	}
	if !c.parents(name) {
		return false
	}
	return c.write(name, h, m)
}

// fits checks the limits the reader applies to one member (snapshot.Read's loader).
func (c *capture) fits(name string, m *member) error {
	b := c.budget
	switch {
	case len(name)+1 > b.NameLen: // a directory's name gets a trailing slash
		return overBudget("NameLen", int64(b.NameLen), "bytes in a member name")
	case len(m.target) > b.LinkTargetLen:
		return overBudget("LinkTargetLen", int64(b.LinkTargetLen), "bytes in a link target")
	case strings.Count(name, "/")+1 > b.PathDepth:
		return overBudget("PathDepth", int64(b.PathDepth), "elements in a member name")
	case int64(len(m.data)) > b.MemberSize:
		return overBudget("MemberSize", b.MemberSize, fmt.Sprintf("bytes in one file (this one has %d)", len(m.data)))
	}
	return nil
}

// parents writes the directories above name that are not written yet, from the top.
// It reports false, and lists name as left out, when one of them was written as
// something other than a directory: the reader would refuse the member.
func (c *capture) parents(name string) bool {
	var missing []string
	for d := path.Dir(name); d != "."; d = path.Dir(d) {
		typ, ok := c.names[nameHash(d)]
		if ok {
			if typ != tar.TypeDir {
				c.skip(hostfs.PathError("capture", name, fmt.Errorf("%w: /%s was captured as a file or link", errNotUnderDir, d)))
				return false
			}
			break
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if !c.write(missing[i], nameHash(missing[i]), &member{typ: tar.TypeDir, perm: 0o755}) {
			return false
		}
	}
	return true
}

// errNotUnderDir is the reason for leaving out a member whose parent is not a
// directory in the capture.
var errNotUnderDir = errors.New("its parent is not a directory")

// write writes one member, refusing to grow the archive past what the reader takes.
func (c *capture) write(name string, h uint64, m *member) bool {
	b := c.budget
	if c.nodes+1 > b.Members {
		c.refuse(overBudget("Members", int64(b.Members), "files, links and directories"))
		return false
	}
	if m.typ == tar.TypeReg && c.data+int64(len(m.data)) > b.Data {
		c.refuse(overBudget("Data", b.Data, "bytes of file data"))
		return false
	}
	full := name
	if m.typ == tar.TypeDir {
		full += "/"
	}
	if err := c.tw.write(full, m); err != nil {
		c.err = fmt.Errorf("snapshot: %s: %w", name, err)
		return false
	}
	if c.tw.n > b.Bytes {
		c.refuse(overBudget("Bytes", b.Bytes, "decompressed bytes, headers included"))
		return false
	}
	c.names[h] = m.typ
	c.nodes++
	c.members++
	if m.typ == tar.TypeReg {
		c.data += int64(len(m.data))
	}
	return true
}

// refuse stops the capture: it has grown past a limit of what p2pcheck reads back.
func (c *capture) refuse(err error) {
	c.err = fmt.Errorf("snapshot: this machine's capture is larger than a snapshot p2pcheck reads back (--snapshot): %w", err)
}

// close ends the archive and returns the summary.
func (c *capture) close() (Summary, error) {
	sum := Summary{Members: c.members, Skipped: c.skipped, Manifest: c.manifest}
	if c.err != nil {
		return sum, c.err
	}
	if err := c.tw.close(); err != nil {
		return sum, fmt.Errorf("snapshot: %w", err)
	}
	if c.tw.n > c.budget.Bytes {
		c.refuse(overBudget("Bytes", c.budget.Bytes, "decompressed bytes, headers included"))
		return sum, c.err
	}
	if err := c.zw.Close(); err != nil {
		return sum, fmt.Errorf("snapshot: %w", err)
	}
	return sum, nil
}

// file copies the regular file name, at most limit bytes. An absent file is left out
// silently, as is one nobody may read (write-only attributes).
func (c *capture) file(name string, limit int) { c.fileEdit(name, limit, nil) }

// fileEdit is file with the data passed through edit (nil: none) first. It reports
// whether the file was written.
func (c *capture) fileEdit(name string, limit int, edit func([]byte) []byte) bool {
	fi, err := c.src.Lstat(name)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			c.skip(hostfs.PathError("lstat", name, err))
		}
		return false
	}
	if !fi.Mode.IsRegular() {
		c.notRegular(name, fi.Mode)
		return false
	}
	if fi.Mode.Perm()&0o444 == 0 {
		return false
	}
	b, err := c.src.ReadFile(name, limit)
	if err != nil {
		c.skip(err)
		return false
	}
	if edit != nil {
		b = edit(b)
	}
	return c.add(name, &member{typ: tar.TypeReg, perm: fi.Mode.Perm(), data: b})
}

// fileIn copies the regular file name of the directory d, which is dir of the
// capture, at most limit bytes, passed through edit (nil: none), with the rules of
// file: the listing said it is a regular file, which stands for the look before
// the open (hostfs.Root.ReadListed); the open file is looked at again before it
// is read, and gives its permission bits. A file nobody may read is left out
// silently, as file leaves it out, whether the open was refused
// (sysfs: kernfs_fop_open) or the copy was read. A sysfs attribute is served whole
// by its first read (fs/kernfs/file.c), so one read of one byte more than limit
// takes it, unless toEOF asks to read on. The data lives in the capture's scratch
// buffer.
func (c *capture) fileIn(d hostfs.Root, dir, name string, limit int, toEOF bool, edit func(*capture, []byte)) {
	full := child(dir, name)
	buf := c.buf[:limit+1]
	n, perm, err := d.ReadListed(name, buf, toEOF)
	if err == nil && n == len(buf) {
		err = fmt.Errorf("%w (%d bytes)", hostfs.ErrTooLarge, limit)
	}
	switch {
	case err == nil && perm&0o444 == 0:
		return
	case errors.Is(err, fs.ErrNotExist):
		return
	case errors.Is(err, fs.ErrPermission):
		if fi, lerr := d.Lstat(name); lerr == nil && fi.Mode.Perm()&0o444 == 0 {
			return
		}
		fallthrough
	case err != nil:
		c.skip(hostfs.PathError("read", full, err))
		return
	}
	c.addEdit(full, &member{typ: tar.TypeReg, perm: perm, data: buf[:n]}, edit)
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

// dir records the directory name itself.
func (c *capture) dir(name string) { c.add(name, &member{typ: tar.TypeDir, perm: 0o755}) }

// pciFunctions captures every function of /sys/bus/pci/devices: its link, its
// directory and the directories above it up to the host bridge's. The directories
// are visited in path order, each parent before what is below it, through one
// Walker, so each is opened once, relative to its parent.
func (c *capture) pciFunctions() {
	bus, err := c.src.Sub(busPCIDevices)
	if err != nil {
		c.skip(hostfs.PathError("open", busPCIDevices, err))
		return
	}
	defer bus.Close()
	ents, err := bus.ReadDir(".")
	if err != nil {
		c.skip(hostfs.PathError("readdir", busPCIDevices, err))
		return
	}
	c.dir(busPCIDevices)
	var dirs []string
	for _, e := range ents {
		link := join(busPCIDevices, e.Name)
		if e.Type&fs.ModeSymlink == 0 {
			dirs = append(dirs, link)
			continue
		}
		if dir, ok := c.linkIn(bus, busPCIDevices, e.Name); ok {
			dirs = append(dirs, dir)
		}
	}
	slices.Sort(dirs)
	c.readDirs(visitOrder(dirs))
}

// visitOrder lists the directories a capture visits for the function directories
// dirs, sorted: each function's ancestors up to the host bridge directory,
// /sys/devices/pciDDDD:BB, from the top, then the function, each directory once.
func visitOrder(dirs []string) []string {
	seen := map[string]bool{}
	var order []string
	for _, dir := range dirs {
		var above []string
		for d := path.Dir(dir); strings.HasPrefix(d, sysDevices+"/"); d = path.Dir(d) {
			above = append(above, d)
		}
		for i := len(above) - 1; i >= 0; i-- {
			if !seen[above[i]] {
				seen[above[i]] = true
				order = append(order, above[i])
			}
		}
		if !seen[dir] {
			seen[dir] = true
			order = append(order, dir)
		}
	}
	return order
}

// deviceDir captures one function's or bridge's directory, opened through w. Its
// entries are read by name below it, not by their whole path.
func (c *capture) deviceDir(w *hostfs.Walker, dir string) {
	d, err := w.Open(dir)
	if err != nil {
		c.skip(err)
		return
	}
	ents, err := d.ReadDir(".")
	if err != nil {
		c.skip(hostfs.PathError("readdir", dir, err))
		return
	}
	c.dir(dir)
	for _, e := range ents {
		switch {
		case e.Type == 0:
			switch {
			case neverRead(e.Name):
			case e.Name == "vpd":
				c.vpd(d, dir)
			case c.redact && identifying(e.Name):
			case e.Name == "config":
				c.config(d, dir)
			default:
				c.fileIn(d, dir, e.Name, captureLimit, false, nil)
			}
		case e.Type&fs.ModeSymlink != 0:
			switch {
			case e.Name == "driver":
				if target, ok := c.linkIn(d, dir, e.Name); ok {
					c.driverDir(target)
				}
			case keptLink(e.Name):
				c.linkIn(d, dir, e.Name)
			}
		case e.Type.IsDir():
			switch e.Name {
			case "p2pmem":
				c.p2pmem(d, dir)
			case "net", "infiniband", "nvme":
				c.childNames(d, dir, e.Name)
			}
		default:
			c.notRegular(child(dir, e.Name), e.Type)
		}
	}
}

// linkIn copies the link name of the directory d, which is dir of the capture, and
// returns the root-relative name it points to (see [hostfs.ResolveLink]); ok is
// false, and the failure recorded, when it cannot be read or leads outside the root.
func (c *capture) linkIn(d hostfs.Root, dir, name string) (resolved string, ok bool) {
	full := child(dir, name)
	target, err := d.ReadLink(name)
	if err != nil {
		c.skip(hostfs.PathError("readlink", full, err))
		return "", false
	}
	c.add(full, &member{typ: tar.TypeSymlink, perm: 0o777, target: target})
	resolved, err = hostfs.ResolveLink(full, target)
	if err != nil {
		c.skip(err)
		return "", false
	}
	return resolved, true
}

// driverDir records the directory a function's driver link points to
// (sys/bus/pci/drivers/<name>), empty: readers that resolve the link with realpath,
// as lspci does for its driver field (pciutils lib/sysfs.c), need it to exist.
func (c *capture) driverDir(target string) { c.dir(target) }

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

// p2pmem captures the p2pmem group of the function directory d, which is dir of
// the capture; allocate is stored empty, never read (reading it is meaningless and
// mapping it allocates device memory).
func (c *capture) p2pmem(d hostfs.Root, dir string) {
	name := join(dir, "p2pmem")
	g, err := d.Sub("p2pmem")
	if err != nil {
		c.skip(hostfs.PathError("open", name, err))
		return
	}
	defer g.Close()
	c.dir(name)
	for _, f := range []string{"size", "available", "published"} {
		c.fileIn(g, name, f, attrLimit, false, nil)
	}
	fi, err := g.Lstat("allocate")
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			c.skip(hostfs.PathError("lstat", join(name, "allocate"), err))
		}
		return
	}
	c.add(join(name, "allocate"), &member{typ: tar.TypeReg, perm: fi.Mode.Perm()})
}

// childNames records the entries of the directory name of d, which is dir of the
// capture, as empty directories.
func (c *capture) childNames(d hostfs.Root, dir, name string) {
	full := join(dir, name)
	ents, err := d.ReadDir(name)
	if err != nil {
		c.skip(hostfs.PathError("readdir", full, err))
		return
	}
	c.dir(full)
	for _, e := range ents {
		c.dir(join(full, e.Name))
	}
}

func (c *capture) procFiles() {
	for _, f := range []string{
		"proc/cpuinfo", "proc/cmdline", "proc/version", "proc/modules", "proc/devices",
		"proc/driver/nvidia/version", "proc/driver/nvidia/params",
		"proc/driver/gdrdrv/params",
	} {
		if c.redact && slices.Contains(hostFiles, f) && c.host != "" {
			c.fileEdit(f, procLimit, func(b []byte) []byte { return replaceWord(b, c.host, redactedHost) })
		} else {
			c.file(f, procLimit)
		}
	}
	if c.fileEdit("proc/config.gz", procLimit, nil) {
		return
	}
	v, err := procfs.New(c.src).KernelVersion()
	if err != nil || strings.Contains(v.Release, "/") {
		return
	}
	c.file("boot/config-"+v.Release, procLimit)
}

func (c *capture) platformFiles() {
	c.groupFiles(iommuGroups, "type")
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
	c.groupFiles(memoryPeers, "version")
}

// groupFiles captures the directory dir, if it exists, with the file name of each
// directory in it (/sys/kernel/iommu_groups/N/type), each opened below dir.
func (c *capture) groupFiles(dir, name string) {
	top, err := c.src.Sub(dir)
	if err != nil {
		return
	}
	defer top.Close()
	ents, err := top.ReadDir(".")
	if err != nil {
		return
	}
	c.dir(dir)
	for _, e := range ents {
		sub := join(dir, e.Name)
		c.dir(sub)
		g, err := top.Sub(e.Name)
		if err != nil {
			c.skip(hostfs.PathError("open", sub, err))
			continue
		}
		c.fileIn(g, sub, name, attrLimit, false, nil)
		g.Close()
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
