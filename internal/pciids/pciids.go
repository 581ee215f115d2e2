// Package pciids names PCI vendors, devices, subsystems and classes from the
// pci.ids database (https://pci-ids.ucw.cz) installed on the host, as lspci does.
//
// The file is parsed with github.com/jaypipes/pcidb. pcidb can download pci.ids when
// none is found (PCIDB_ENABLE_NETWORK_FETCH=1 in the environment); this package
// always passes an explicit path and disables the download, so the database is
// never fetched over the network and the environment has no effect.
package pciids

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/jaypipes/pcidb"

	"github.com/p2pkit/p2pkit/pcie"
)

// ErrNoDatabase is returned (wrapped) by Load when no pci.ids file was found.
// Callers may ignore it: names then stay empty.
var ErrNoDatabase = errors.New("pciids: no pci.ids database found")

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

// DB is a loaded pci.ids database.
type DB struct {
	// Path is the file the database was read from.
	Path string
	db   *pcidb.DB
}

// Load reads pci.ids from path, or, when path is empty, from the first of
// DefaultPaths that exists. A name ending in ".gz" is decompressed. When there is no
// file the error wraps ErrNoDatabase.
func Load(path string) (*DB, error) {
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
	} else if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %w", ErrNoDatabase, err)
		}
		return nil, fmt.Errorf("pciids: %w", err)
	}
	db, err := parse(path)
	if err != nil {
		return nil, err
	}
	return &DB{Path: path, db: db}, nil
}

// parse hands path to pcidb with the network fetch off. pcidb's parser slices lines
// at fixed offsets and panics on a short line; a damaged file is an error here, not
// a crash.
func parse(path string) (db *pcidb.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("pciids: %s: malformed database: %v", path, r)
		}
	}()
	noFetch := false
	db, err = pcidb.New(&pcidb.WithOption{Path: &path, EnableNetworkFetch: &noFetch})
	if err != nil {
		return nil, fmt.Errorf("pciids: %s: %w", path, err)
	}
	return db, nil
}

const hexDigits = "0123456789abcdef"

// hex4 formats an ID as pci.ids keys it: four lowercase hex digits.
func hex4(v uint16) string {
	return string([]byte{hexDigits[v>>12], hexDigits[v>>8&0xf], hexDigits[v>>4&0xf], hexDigits[v&0xf]})
}

// hex2 formats a class or subclass ID as pci.ids keys it: two lowercase hex digits.
func hex2(v uint8) string { return string([]byte{hexDigits[v>>4], hexDigits[v&0xf]}) }

// Vendor returns the vendor's name, or "" when unknown.
func (db *DB) Vendor(vendor uint16) string {
	if v := db.db.Vendors[hex4(vendor)]; v != nil {
		return v.Name
	}
	return ""
}

// Device returns the device's name, or "" when unknown.
func (db *DB) Device(vendor, device uint16) string {
	if p := db.db.Products[hex4(vendor)+hex4(device)]; p != nil {
		return p.Name
	}
	return ""
}

// Subsystem returns the name pci.ids gives the subsystem (subvendor, subdevice) of
// the device, or "" when it has none.
func (db *DB) Subsystem(vendor, device, subVendor, subDevice uint16) string {
	p := db.db.Products[hex4(vendor)+hex4(device)]
	if p == nil {
		return ""
	}
	sv, sd := hex4(subVendor), hex4(subDevice)
	for _, s := range p.Subsystems {
		if s.VendorID == sv && s.ID == sd {
			return s.Name
		}
	}
	return ""
}

// Class returns the name lspci prints for a class code (base<<16 | sub<<8 |
// prog-if): the subclass's name, or the base class's when the subclass is unknown,
// or "" when both are.
func (db *DB) Class(class uint32) string {
	c := db.db.Classes[hex2(uint8(class>>16))]
	if c == nil {
		return ""
	}
	sub := hex2(uint8(class >> 8))
	for _, s := range c.Subclasses {
		if s.ID == sub {
			return s.Name
		}
	}
	return c.Name
}

// Annotate fills VendorName, DeviceName, ClassName and SubsystemName of every
// device from db. IDs come from config space when it was decoded, else from the
// record's sysfs attributes. A nil db leaves the names as they are.
func Annotate(t *pcie.Topology, db *DB) {
	if db == nil {
		return
	}
	for _, d := range t.Devices {
		vendor, device := d.Vendor, d.Device
		if d.Config != nil {
			vendor, device = d.Config.Vendor, d.Config.Device
		}
		d.VendorName = db.Vendor(vendor)
		d.DeviceName = db.Device(vendor, device)
		d.ClassName = db.Class(d.ClassCode())
		d.SubsystemName = db.Subsystem(vendor, device, d.SubVendor, d.SubDevice)
	}
}
