// Package pciids names PCI vendors, devices, subsystems and classes from the
// pci.ids database (https://pci-ids.ucw.cz) installed on the host, as lspci does.
//
// The database is only ever read from a local file, never fetched over the network.
// It is read as a stream and indexed lazily: loading checks every line, notes where
// each vendor's block and the class section start and keeps those blocks (LoadFor:
// only the blocks of the vendors a tree holds); a vendor's devices and subsystems are
// parsed the first time one of them is asked for. p2pcheck names a few dozen vendors
// per run, so it never pays for parsing the other thousands (a full parse with
// github.com/jaypipes/pcidb costs about 90 ms and 12 MB, more than the whole
// `p2pcheck topo` budget).
package pciids

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/pcie"
)

// ErrNoDatabase is returned (wrapped) by Load when no pci.ids file was found.
// Callers may ignore it: names then stay empty.
var ErrNoDatabase = errors.New("pciids: no pci.ids database found")

// maxSize bounds what Load reads: pci.ids is about 1.4 MB today.
const maxSize = 32 << 20

// kind is the database file as hostfs reads it: a regular file named by the
// user or found in DefaultPaths, at most maxSize bytes.
var kind = hostfs.Kind{Name: "pci.ids database", Limit: maxSize}

// DefaultPaths returns where distributions install pci.ids, in the order Load tries
// them: pciutils' default (/usr/share/misc, Debian and Ubuntu), hwdata's
// (/usr/share/hwdata, Fedora, RHEL, Arch), the older /usr/share/pci.ids, the
// gzip'd variants, and the local ones (/usr/local/share, update-pciids' default
// prefix).
func DefaultPaths() []string {
	return []string{
		"/usr/share/misc/pci.ids",
		"/usr/share/hwdata/pci.ids",
		"/usr/share/pci.ids",
		"/usr/share/misc/pci.ids.gz",
		"/usr/share/hwdata/pci.ids.gz",
		"/usr/share/pci.ids.gz",
		"/usr/local/share/pci.ids",
		"/usr/local/share/hwdata/pci.ids",
	}
}

// DB is a loaded pci.ids database. It is safe for concurrent use.
type DB struct {
	// Path is the file the database was read from.
	Path string

	data    []byte           // the vendor blocks kept, then the class section
	vendors map[uint16]int32 // offset in data of each kept vendor's line
	classes int              // offset of the first "C " line, or len(data)

	mu      sync.Mutex
	devices map[uint32]*device // vendor<<16 | device, nil when not listed
	classNm *classTable
}

type device struct {
	name       string
	subsystems map[uint32]string // subvendor<<16 | subdevice
}

// Load reads the whole of pci.ids from path, or, when path is empty, from the first
// of DefaultPaths that exists, counting its bytes on m (nil: on nothing but its own
// limit). A name ending in ".gz" is decompressed. It is read with hostfs.OpenNamed:
// a FIFO or device node is refused without blocking. When there is no file the
// error wraps ErrNoDatabase; a file whose vendor lines are malformed is an error
// too.
func Load(m *hostfs.Meter, path string) (*DB, error) {
	return load(m, path, nil)
}

// LoadFor reads pci.ids as Load does, every line checked alike, but keeps only what
// naming t's devices looks up (see Annotate): the lines of their vendors, of their
// devices and those devices' subsystems, and the class section. The DB it returns
// names t's devices as Load's would; every other vendor and device is unknown to it.
// pci.ids is read through a buffer of scanBuffer bytes and a few KiB of it kept,
// where keeping all 1.4 MB of it (Intel's block alone is 370 KB) faulted in as much
// fresh heap: a fifth of `topo`'s CPU time on a node of 68 functions on a VM where a
// page fault costs 11 µs.
func LoadFor(m *hostfs.Meter, path string, t *pcie.Topology) (*DB, error) {
	f := &filter{vendors: map[uint16]bool{}, devices: map[uint32]bool{}}
	for _, d := range t.Devices {
		k := lookupKey(d)
		f.vendors[k.vendor] = true
		f.devices[uint32(k.vendor)<<16|uint32(k.device)] = true
	}
	return load(m, path, f)
}

// filter is what LoadFor keeps of pci.ids.
type filter struct {
	vendors map[uint16]bool
	devices map[uint32]bool // vendor<<16 | device
}

// scanBuffer is the buffer pci.ids is read through.
const scanBuffer = 64 << 10

// maxLine is the longest line pciutils reads, newline excluded: lspci refuses a
// database with a longer one ("Line too long", pciutils lib/names-parse.c
// id_parse_list reads lines with fgets into MAX_LINE bytes, lib/names.h).
const maxLine = 1024 - 2

// load reads the database at path (see Load), keeping what f selects, or all of it
// when f is nil.
func load(m *hostfs.Meter, path string, f *filter) (*DB, error) {
	if path == "" {
		for _, p := range DefaultPaths() {
			if _, err := os.Stat(p); err == nil {
				path = p
				break
			}
		}
		if path == "" {
			return nil, ErrNoDatabase
		}
	}
	file, err := hostfs.OpenNamed(m, path, kind)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %w", ErrNoDatabase, err)
		}
		return nil, fmt.Errorf("pciids: %w", err)
	}
	defer file.Close()
	var r io.Reader = file
	db := &DB{Path: path}
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(file)
		if err != nil {
			return nil, fmt.Errorf("pciids: %s: %w", path, err)
		}
		r = zr
	} else if s := file.Size(); f == nil && s >= 0 && s <= maxSize {
		db.data = make([]byte, 0, s)
	}
	if err := db.scan(io.LimitReader(r, maxSize+1), f); err != nil {
		return nil, fmt.Errorf("pciids: %s: %w", path, err)
	}
	return db, nil
}

// scan reads the database from r, a buffer of scanBuffer bytes at a time, and hands
// each line to a scanner.
func (db *DB) scan(r io.Reader, f *filter) error {
	db.vendors = map[uint16]int32{}
	db.classes = -1
	sc := scanner{db: db, f: f, vendor: -1}
	buf := make([]byte, scanBuffer)
	have, size := 0, 0 // buf[:have] is read and not yet scanned
	for {
		n, err := io.ReadFull(r, buf[have:])
		have += n
		if size += n; size > maxSize {
			return fmt.Errorf("larger than %d bytes", maxSize)
		}
		rest := buf[:have]
		for {
			i := bytes.IndexByte(rest, '\n')
			if i < 0 {
				break
			}
			if err := sc.line(rest[:i+1]); err != nil {
				return err
			}
			rest = rest[i+1:]
		}
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			if len(rest) > 0 {
				if err := sc.line(rest); err != nil {
					return err
				}
			}
			if db.classes < 0 {
				db.classes = len(db.data)
			}
			return nil
		case err != nil:
			return err
		case len(rest) == len(buf):
			return sc.tooLong(sc.lineNo + 1)
		}
		have = copy(buf, rest)
	}
}

// scanner finds the vendor lines ("vvvv  Name" at the start of a line) up to the
// class section ("C cc  Name") and keeps each vendor's block (its line and the
// device and subsystem lines below it), then the class section and all after it.
// With a filter it keeps of a block only the lines that vendorLine and findDevice
// look at for what the filter holds: the vendor's line, and the lines of each
// device ("\tdddd  Name") with the subsystem and comment lines that follow them.
// Names are cut out of what was kept when asked for.
type scanner struct {
	db     *DB
	f      *filter
	lineNo int
	keep   bool // the line is kept
	vendor int  // the block's vendor while the filter holds it, or -1
	device bool // in the lines that follow a kept device's
}

// line scans one line, with its newline unless it is the last.
func (sc *scanner) line(line []byte) error {
	sc.lineNo++
	text := line
	if n := len(text); n > 0 && text[n-1] == '\n' {
		text = text[:n-1]
	}
	if len(text) > maxLine {
		return sc.tooLong(sc.lineNo)
	}
	db, f := sc.db, sc.f
	switch {
	case db.classes >= 0:
		sc.keep = true
	case len(text) > 0 && text[0] == '\t':
		switch {
		case f == nil:
		case sc.vendor < 0: // most lines: the vendor's block is not kept
			sc.keep = false
		case len(text) > 1 && text[1] == '\t':
			sc.keep = sc.device
		default:
			id, ok := lowerHex4(text[1:])
			sc.device = ok && len(text) > 5 && text[5] == ' ' && f.devices[uint32(sc.vendor)<<16|uint32(id)]
			sc.keep = sc.device
		}
	case len(text) == 0 || text[0] == '#':
		if f != nil {
			sc.keep = sc.device && len(text) > 0
			sc.device = sc.keep
		}
	case text[0] == 'C' && len(text) > 1 && text[1] == ' ':
		db.classes, sc.keep = len(db.data), true
	default:
		id, ok := hexID(text[:min(4, len(text))])
		if !ok || len(text) < 6 || (text[4] != ' ' && text[4] != '\t') {
			return fmt.Errorf("line %d: malformed vendor line %q", sc.lineNo, text)
		}
		sc.keep, sc.vendor, sc.device = f == nil || f.vendors[uint16(id)], -1, false
		if sc.keep {
			db.vendors[uint16(id)] = int32(len(db.data))
			sc.vendor = int(id)
		}
	}
	if sc.keep {
		db.data = append(db.data, line...)
	}
	return nil
}

// tooLong is the error for line n past maxLine.
func (sc *scanner) tooLong(n int) error {
	return fmt.Errorf("line %d: longer than %d bytes, which pciutils refuses too", n, maxLine)
}

// lowerHex4 parses the four lowercase hexadecimal digits at the start of b, as
// findDevice matches a device's line.
func lowerHex4(b []byte) (uint16, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var id uint16
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			id = id<<4 | uint16(c-'0')
		case 'a' <= c && c <= 'f':
			id = id<<4 | uint16(c-'a'+10)
		default:
			return 0, false
		}
	}
	return id, true
}

// vendorLine returns the vendor's line and the offset of the next one.
func (db *DB) vendorLine(vendor uint16) (line []byte, body int, ok bool) {
	off, ok := db.vendors[vendor]
	if !ok {
		return nil, 0, false
	}
	line, body = lineAt(db.data, int(off))
	return line, body, true
}

// lineAt returns the line starting at off without its newline, and the offset of
// the next line.
func lineAt(data []byte, off int) (line []byte, next int) {
	i := bytes.IndexByte(data[off:], '\n')
	if i < 0 {
		return data[off:], len(data)
	}
	return data[off : off+i], off + i + 1
}

// idLine parses "<n hex digits>  <name>" (the separator is two spaces in pci.ids;
// any run of blanks is accepted).
func idLine(line []byte, n int) (id uint32, name string, ok bool) {
	if len(line) < n+2 || (line[n] != ' ' && line[n] != '\t') {
		return 0, "", false
	}
	id, ok = hexID(line[:n])
	return id, string(bytes.TrimSpace(line[n:])), ok
}

// hexID parses b as a hexadecimal number.
func hexID(b []byte) (id uint32, ok bool) {
	for _, c := range b {
		v, ok := hexVal(c)
		if !ok {
			return 0, false
		}
		id = id<<4 | v
	}
	return id, len(b) > 0
}

func hexVal(c byte) (uint32, bool) {
	switch {
	case '0' <= c && c <= '9':
		return uint32(c - '0'), true
	case 'a' <= c && c <= 'f':
		return uint32(c-'a') + 10, true
	case 'A' <= c && c <= 'F':
		return uint32(c-'A') + 10, true
	}
	return 0, false
}

// device returns the entry of vendor's device, looking for its line in the vendor's
// block on first use and caching what it found (nil too). A vendor's block can hold
// thousands of lines (Intel's does), of which a machine uses a few, so only the
// device's own line and its subsystem lines are parsed. Lines that do not parse are
// skipped: one bad entry costs one name, not all.
func (db *DB) device(vendor, dev uint16) *device {
	key := uint32(vendor)<<16 | uint32(dev)
	db.mu.Lock()
	defer db.mu.Unlock()
	if d, ok := db.devices[key]; ok {
		return d
	}
	if db.devices == nil {
		db.devices = map[uint32]*device{}
	}
	d := db.findDevice(vendor, dev)
	db.devices[key] = d
	return d
}

func (db *DB) findDevice(vendor, dev uint16) *device {
	_, body, ok := db.vendorLine(vendor)
	if !ok {
		return nil
	}
	// The block runs to the next line that starts with neither a tab nor '#'.
	end := body
	for end < db.classes {
		line, next := lineAt(db.data, end)
		if len(line) > 0 && line[0] != '\t' && line[0] != '#' {
			break
		}
		end = next
	}
	block := db.data[body:end]
	var want [6]byte
	want[0] = '\t'
	const hexDigits = "0123456789abcdef"
	for i := range 4 {
		want[1+i] = hexDigits[dev>>(12-4*i)&0xf]
	}
	want[5] = ' '
	for off := 0; off < len(block); {
		i := bytes.Index(block[off:], want[:])
		if i < 0 {
			return nil
		}
		at := off + i
		off = at + 1
		if at > 0 && block[at-1] != '\n' {
			continue // inside another line
		}
		line, next := lineAt(block, at)
		_, name, ok := idLine(line[1:], 4)
		if !ok {
			return nil
		}
		d := &device{name: name}
		// Its subsystems follow on lines with two tabs: "\t\tssss dddd  name".
		for next < len(block) {
			sub, after := lineAt(block, next)
			if len(sub) < 2 || sub[0] != '\t' || sub[1] != '\t' {
				if len(sub) == 0 || sub[0] != '#' {
					break
				}
			} else if len(sub) >= 11 && sub[6] == ' ' {
				sv, ok1 := hexID(sub[2:6])
				sd, sname, ok2 := idLine(sub[7:], 4)
				if ok1 && ok2 {
					if d.subsystems == nil {
						d.subsystems = map[uint32]string{}
					}
					d.subsystems[sv<<16|sd] = sname
				}
			}
			next = after
		}
		return d
	}
	return nil
}

// Vendor returns the vendor's name, or "" when unknown.
func (db *DB) Vendor(vendor uint16) string {
	line, _, ok := db.vendorLine(vendor)
	if !ok {
		return ""
	}
	_, name, _ := idLine(line, 4)
	return name
}

// Device returns the device's name, or "" when unknown.
func (db *DB) Device(vendor, device uint16) string {
	if d := db.device(vendor, device); d != nil {
		return d.name
	}
	return ""
}

// Subsystem returns the subsystem's name as lspci looks it up (pciutils
// lib/names.c id_lookup_subsys): the entry under the device in pci.ids, or, when
// the subsystem IDs equal the device's own, the device's name; "" otherwise.
// (pci.ids' generic "S" blocks, which lspci also consults, are not indexed: the
// distributed database has none.)
func (db *DB) Subsystem(vendor, device, subVendor, subDevice uint16) string {
	d := db.device(vendor, device)
	if d == nil {
		return ""
	}
	if n := d.subsystems[uint32(subVendor)<<16|uint32(subDevice)]; n != "" {
		return n
	}
	if vendor == subVendor && device == subDevice {
		return d.name
	}
	return ""
}

// Class returns the name lspci prints for a class code (base<<16 | sub<<8 |
// prog-if), with lspci's fallbacks (pcie.ClassText): the subclass's name, the base
// class's name and the code when the subclass is unknown, "Class xxxx" when both are.
func (db *DB) Class(class uint32) string {
	c := db.classNames()
	base, sub := uint8(class>>16), uint8(class>>8)
	return pcie.ClassText(class, c.subclasses[uint16(base)<<8|uint16(sub)], c.bases[base])
}

// classTable holds the class section: base classes by their one-byte code and
// subclasses by base<<8 | sub. Two tables, because every 16-bit key is a possible
// subclass.
type classTable struct {
	bases      map[uint8]string
	subclasses map[uint16]string
}

// classNames parses the class section once.
func (db *DB) classNames() *classTable {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.classNm != nil {
		return db.classNm
	}
	c := &classTable{bases: map[uint8]string{}, subclasses: map[uint16]string{}}
	base := -1
	for off := db.classes; off < len(db.data); {
		line, next := lineAt(db.data, off)
		off = next
		switch {
		case len(line) == 0 || line[0] == '#':
		case bytes.HasPrefix(line, []byte("C ")):
			id, name, ok := idLine(line[2:], 2)
			if !ok {
				base = -1
				continue
			}
			base = int(id)
			c.bases[uint8(base)] = name
		case line[0] != '\t':
			base = -1 // another top-level block
		case base >= 0 && (len(line) < 2 || line[1] != '\t'):
			if id, name, ok := idLine(line[1:], 2); ok {
				c.subclasses[uint16(base)<<8|uint16(id)] = name
			}
		}
	}
	db.classNm = c
	return c
}

// Annotate fills VendorName, DeviceName, ClassName and SubsystemName of every
// device from db. IDs come from config space when it was decoded, else from the
// record's sysfs attributes. Functions with the same IDs (the VFs of one PF) are
// looked up once. A nil db leaves the names as they are.
func Annotate(t *pcie.Topology, db *DB) {
	if db == nil {
		return
	}
	type names struct{ vendor, device, class, subsystem string }
	seen := map[key]names{}
	for _, d := range t.Devices {
		k := lookupKey(d)
		n, ok := seen[k]
		if !ok {
			n = names{
				vendor:    db.Vendor(k.vendor),
				device:    db.Device(k.vendor, k.device),
				class:     db.Class(k.class),
				subsystem: db.Subsystem(k.vendor, k.device, k.subVendor, k.subDevice),
			}
			seen[k] = n
		}
		d.VendorName, d.DeviceName, d.ClassName, d.SubsystemName = n.vendor, n.device, n.class, n.subsystem
	}
}

// key is what Annotate looks a device up by.
type key struct {
	vendor, device, subVendor, subDevice uint16
	class                                uint32
}

// lookupKey returns d's IDs as Annotate looks them up: the vendor and device from
// config space when it was decoded, else from the record's sysfs attributes.
func lookupKey(d *pcie.Device) key {
	k := key{d.Vendor, d.Device, d.SubVendor, d.SubDevice, d.ClassCode()}
	if d.Config != nil {
		k.vendor, k.device = d.Config.Vendor, d.Config.Device
	}
	return k
}
