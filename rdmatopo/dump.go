// Package rdmatopo reads the JSON capture of rdma-core's kernel-boot/rdma_topo
// ("rdma_topo dump", replayed by its -F FILE) into a root held in memory, laid out as
// sysfs lays out what the capture holds, so that every p2pcheck command runs on it as
// on a snapshot: `p2pcheck --snapshot dump.json topo`.
//
// A capture is a JSON list with one object per PCI function (rdma_topo's
// SysfsDevice.to_dict): "realpath" (the function's /sys/devices directory),
// "config" and "vpd" (the files, zlib-compressed, base64), "modalias",
// "iommu_group" and "numa_node" (numbers, or null), and "subsystems" (the names
// below its drm, infiniband, net and nvme directories). rdma_topo leaves out
// functions of a few system classes (host bridges, ISA bridges, system
// peripherals such as Intel's VT-d function, performance counters), and records no
// driver, link or BAR attribute and no platform file (/proc): what p2pcheck derives
// from those is unknown on such a capture. Two consequences: the class directories
// are written, but p2pcheck, which believes them only below a function with a driver
// (they are the driver's), shows no network or RDMA device names; and where the
// function the kernel's P2PDMA host-bridge whitelist looks at (the first on a root
// bus) was left out, the verdict through that host bridge is not the machine's.
//
// The capture is untrusted input: its size, the number of functions, every
// decompressed file, path names and depth are bounded, and nothing in it names a
// file outside the root it builds.
package rdmatopo

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/pcie"
)

// ErrNotDump is returned (wrapped) for input that is not an rdma_topo capture.
var ErrNotDump = errors.New("rdmatopo: not an rdma_topo dump")

// Limits of a capture.
const (
	maxDumpBytes = 64 << 20 // the JSON text
	maxFunctions = 65_536
	maxConfig    = pcie.ConfigExpSize
	maxVPD       = pcie.MaxVPDSize
	maxNames     = 256 // names per subsystem of one function
	maxDepth     = 64  // path elements of a realpath
)

// device is one element of the capture.
type device struct {
	Realpath   string              `json:"realpath"`
	Config     *string             `json:"config"`
	Modalias   *string             `json:"modalias"`
	IOMMUGroup *int                `json:"iommu_group"`
	NUMANode   *int                `json:"numa_node"`
	VPD        *string             `json:"vpd"`
	Subsystems map[string][]string `json:"subsystems"`
}

// IsDump reports whether b starts like an rdma_topo capture: JSON text whose first
// value is a list (a p2pcheck snapshot is gzip'd).
func IsDump(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '['
}

// Open reads the capture in the file at name.
func Open(name string) (hostfs.Root, error) {
	f, err := os.Open(name)
	if err != nil {
		return hostfs.Root{}, fmt.Errorf("rdmatopo: %w", err)
	}
	defer f.Close()
	return Read(f)
}

// Read reads a capture from r into a root held in memory.
func Read(r io.Reader) (hostfs.Root, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxDumpBytes+1))
	if err != nil {
		return hostfs.Root{}, fmt.Errorf("rdmatopo: %w", err)
	}
	if len(b) > maxDumpBytes {
		return hostfs.Root{}, fmt.Errorf("rdmatopo: %w: more than %d bytes", hostfs.ErrBudget, maxDumpBytes)
	}
	if !IsDump(b) {
		return hostfs.Root{}, fmt.Errorf("%w: not a JSON list", ErrNotDump)
	}
	var devs []device
	if err := json.Unmarshal(b, &devs); err != nil {
		return hostfs.Root{}, fmt.Errorf("%w: %w", ErrNotDump, err)
	}
	if len(devs) > maxFunctions {
		return hostfs.Root{}, fmt.Errorf("rdmatopo: %w: %d functions, more than %d", hostfs.ErrBudget, len(devs), maxFunctions)
	}
	m := hostfs.NewMemBuilder(hostfs.DefaultBudget)
	seen := map[pcie.Address]bool{}
	groups := map[int]bool{}
	for i, d := range devs {
		a, err := d.add(m, seen)
		if err != nil {
			return hostfs.Root{}, fmt.Errorf("rdmatopo: item %d of %d (%s): %w", i, len(devs), a, err)
		}
		if d.IOMMUGroup != nil {
			groups[*d.IOMMUGroup] = true
		}
	}
	for g := range groups {
		if err := m.Dir("sys/kernel/iommu_groups/"+strconv.Itoa(g), 0o755); err != nil {
			return hostfs.Root{}, fmt.Errorf("rdmatopo: %w", err)
		}
	}
	// The manifest of a p2pcheck snapshot (package snapshot), naming the source.
	manifest := `{"redacted": [], "truncated_configs": 0, "nvml": false, "source": "rdma_topo dump"}` + "\n"
	if err := m.File("p2pkit/manifest.json", 0o444, []byte(manifest)); err != nil {
		return hostfs.Root{}, fmt.Errorf("rdmatopo: %w", err)
	}
	return m.Root(), nil
}

// add writes one function's directory, its sys/bus/pci/devices link and its files.
func (d device) add(m *hostfs.MemBuilder, seen map[pcie.Address]bool) (pcie.Address, error) {
	dir, a, err := devicePath(d.Realpath)
	if err != nil {
		return a, err
	}
	if seen[a] {
		return a, errors.New("function listed twice")
	}
	seen[a] = true
	if d.Config == nil || d.Modalias == nil {
		return a, errors.New(`"config" and "modalias" are required`)
	}
	cfg, err := decode(*d.Config, maxConfig)
	switch {
	case err != nil:
		return a, fmt.Errorf("config: %w", err)
	case len(cfg) < pcie.ConfigHeaderSize:
		return a, fmt.Errorf("config: %d bytes, want at least %d", len(cfg), pcie.ConfigHeaderSize)
	}
	files := []attr{{"config", cfg}, {"modalias", []byte(*d.Modalias + "\n")}}
	files = append(files, headerAttrs(cfg)...)
	if d.NUMANode != nil {
		files = append(files, attr{"numa_node", []byte(strconv.Itoa(*d.NUMANode) + "\n")})
	}
	if d.VPD != nil {
		v, err := decode(*d.VPD, maxVPD)
		if err != nil {
			return a, fmt.Errorf("vpd: %w", err)
		}
		files = append(files, attr{"vpd", v})
	}
	for _, f := range files {
		if err := m.File(dir+"/"+f.name, 0o444, f.data); err != nil {
			return a, err
		}
	}
	if err := d.links(m, dir, a); err != nil {
		return a, err
	}
	return a, d.classDirs(m, dir)
}

// links writes the function's sys/bus/pci/devices link and iommu_group link.
func (d device) links(m *hostfs.MemBuilder, dir string, a pcie.Address) error {
	if err := m.Symlink("sys/bus/pci/devices/"+a.String(), 0o777, "../../../"+strings.TrimPrefix(dir, "sys/")); err != nil {
		return err
	}
	if d.IOMMUGroup == nil {
		return nil
	}
	if *d.IOMMUGroup < 0 {
		return fmt.Errorf("iommu_group %d", *d.IOMMUGroup)
	}
	up := strings.Repeat("../", strings.Count(dir, "/"))
	return m.Symlink(dir+"/iommu_group", 0o777, up+"sys/kernel/iommu_groups/"+strconv.Itoa(*d.IOMMUGroup))
}

// classDirs writes the net, infiniband, nvme and drm directories the function's
// subsystems name.
func (d device) classDirs(m *hostfs.MemBuilder, dir string) error {
	for _, sub := range []string{"drm", "infiniband", "net", "nvme"} {
		names := d.Subsystems[sub]
		if len(names) > maxNames {
			return fmt.Errorf("%s: %d names, more than %d", sub, len(names), maxNames)
		}
		for _, n := range names {
			if n == "" || n == "." || n == ".." || strings.ContainsAny(n, "/\x00") || len(n) > 255 {
				return fmt.Errorf("%s: bad name %q", sub, n)
			}
			if err := m.Dir(dir+"/"+sub+"/"+n, 0o755); err != nil {
				return err
			}
		}
	}
	return nil
}

// devicePath checks a realpath, "/sys/devices/pciDDDD:BB/<bdf>/.../<bdf>", and
// returns it relative to the root with the function's address. What comes before
// the last "/sys/devices/" is dropped: a capture of a tree below another root (what
// RDMA_TOPO_DEVDIR points at) records that root's path there.
func devicePath(real string) (string, pcie.Address, error) {
	i := strings.LastIndex(real, "/sys/devices/")
	if i < 0 || path.Clean(real) != real || !strings.HasPrefix(real, "/") {
		return "", pcie.Address{}, fmt.Errorf("realpath %.200q is not a clean /sys/devices path", real)
	}
	rel := real[i+len("/sys/devices/"):]
	parts := strings.Split(rel, "/")
	if len(parts) < 2 || len(parts) > maxDepth || !strings.HasPrefix(parts[0], "pci") {
		return "", pcie.Address{}, fmt.Errorf("realpath %.200q is not below a host bridge", real)
	}
	var a pcie.Address
	for _, p := range parts[1:] {
		x, err := pcie.ParseAddress(p)
		if err != nil {
			return "", pcie.Address{}, fmt.Errorf("realpath %.200q: %w", real, err)
		}
		a = x
	}
	return "sys/devices/" + rel, a, nil
}

// decode undoes rdma_topo's b64encode(compress(data)), reading at most limit bytes.
func decode(s string, limit int) ([]byte, error) {
	z, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	zr, err := zlib.NewReader(bytes.NewReader(z))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	b, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", hostfs.ErrBudget, limit)
	}
	return b, nil
}

// attr is one attribute file of a function.
type attr struct {
	name string
	data []byte
}

// headerAttrs are the attributes sysfs derives from the standard header, which the
// capture does not hold as files: vendor, device, class, revision and, for a normal
// header, the subsystem IDs (drivers/pci/pci-sysfs.c).
func headerAttrs(c []byte) []attr {
	le16 := func(off int) uint16 { return uint16(c[off]) | uint16(c[off+1])<<8 }
	out := []attr{
		{"vendor", fmt.Appendf(nil, "0x%04x\n", le16(0))},
		{"device", fmt.Appendf(nil, "0x%04x\n", le16(2))},
		{"revision", fmt.Appendf(nil, "0x%02x\n", c[8])},
		{"class", fmt.Appendf(nil, "0x%02x%02x%02x\n", c[11], c[10], c[9])},
	}
	if c[0x0e]&0x7f == 0 {
		out = append(out, attr{"subsystem_vendor", fmt.Appendf(nil, "0x%04x\n", le16(0x2c))},
			attr{"subsystem_device", fmt.Appendf(nil, "0x%04x\n", le16(0x2e))})
	}
	return out
}
