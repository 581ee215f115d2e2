// Package pciids names PCI vendors, devices, subsystems and classes from the
// pci.ids database (https://pci-ids.ucw.cz) installed on the host, as lspci does.
//
// The database is only ever read from a local file, never fetched over the network.
// It is indexed lazily: Load reads the file and notes where each vendor's block and
// the class section start; a vendor's devices and subsystems are parsed the first
// time one of them is asked for. p2pcheck names a few dozen vendors per run, so it
// never pays for parsing the other thousands (a full parse with
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

	data    []byte
	vendors []int32 // by vendor ID: offset of the vendor's line + 1, 0 when absent
	classes int     // offset of the first "C " line, or len(data)

	mu      sync.Mutex
	devices map[uint32]*device // vendor<<16 | device, nil when not listed
	classNm *classTable
}

type device struct {
	name       string
	subsystems map[uint32]string // subvendor<<16 | subdevice
}

// Load reads pci.ids from path, or, when path is empty, from the first of
// DefaultPaths that exists, counting its bytes on m (nil: on nothing but its own
// limit). A name ending in ".gz" is decompressed. It is read with hostfs.OpenNamed:
// a FIFO or device node is refused without blocking. When there is no file the
// error wraps ErrNoDatabase; a file whose vendor lines are malformed is an error
// too.
func Load(m *hostfs.Meter, path string) (*DB, error) {
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
	data, err := readAll(m, path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %w", ErrNoDatabase, err)
		}
		return nil, fmt.Errorf("pciids: %w", err)
	}
	db := &DB{Path: path, data: data}
	if err := db.index(); err != nil {
		return nil, fmt.Errorf("pciids: %s: %w", path, err)
	}
	return db, nil
}

func readAll(m *hostfs.Meter, path string) ([]byte, error) {
	f, err := hostfs.OpenNamed(m, path, kind)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	size := 0
	if s := f.Size(); s >= 0 && s <= maxSize {
		size = int(s)
	}
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		r = zr
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	_, err = buf.ReadFrom(io.LimitReader(r, maxSize+1))
	data := buf.Bytes()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > maxSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxSize)
	}
	return data, nil
}

// index finds the vendor lines ("vvvv  Name" at the start of a line) up to the
// class section ("C cc  Name"). It keeps offsets only; names are cut out when
// asked for. A table indexed by vendor ID costs 256 KiB and no hashing.
func (db *DB) index() error {
	if len(db.data) >= 1<<31 {
		return fmt.Errorf("too large")
	}
	db.vendors = make([]int32, 1<<16)
	db.classes = len(db.data)
	for off, lineNo := 0, 1; off < len(db.data); lineNo++ {
		line, next := lineAt(db.data, off)
		switch {
		case len(line) == 0 || line[0] == '#' || line[0] == '\t':
		case line[0] == 'C' && len(line) > 1 && line[1] == ' ':
			db.classes = off
			return nil
		default:
			id, ok := hexID(line[:min(4, len(line))])
			if !ok || len(line) < 6 || (line[4] != ' ' && line[4] != '\t') {
				return fmt.Errorf("line %d: malformed vendor line %q", lineNo, line)
			}
			db.vendors[id] = int32(off) + 1
		}
		off = next
	}
	return nil
}

// vendorLine returns the vendor's line and the offset of the next one.
func (db *DB) vendorLine(vendor uint16) (line []byte, body int, ok bool) {
	off := db.vendors[vendor]
	if off == 0 {
		return nil, 0, false
	}
	line, body = lineAt(db.data, int(off-1))
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
	type ids struct {
		vendor, device, subVendor, subDevice uint16
		class                                uint32
	}
	type names struct{ vendor, device, class, subsystem string }
	seen := map[ids]names{}
	for _, d := range t.Devices {
		k := ids{d.Vendor, d.Device, d.SubVendor, d.SubDevice, d.ClassCode()}
		if d.Config != nil {
			k.vendor, k.device = d.Config.Vendor, d.Config.Device
		}
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
