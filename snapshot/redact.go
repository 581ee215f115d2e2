package snapshot

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/pcie"
)

// Members a capture adds beside the machine's own files.
const (
	manifestMember = "p2pkit/manifest.json"
	nvmlMember     = "p2pkit/nvml.json"
)

// extCapIDDSN is PCI_EXT_CAP_ID_DSN, the Device Serial Number extended capability
// (include/uapi/linux/pci_regs.h); its serial is the 8 bytes after the header
// (PCI_DSN_LOW and PCI_DSN_HIGH in drivers/pci/pci.c pci_get_dsn).
const extCapIDDSN = 0x0003

// redactedHost replaces the host name in a redacted snapshot.
const redactedHost = "redacted-hostname"

// Manifest is what a snapshot says about itself, in its p2pkit/manifest.json member.
// Snapshots made before it existed have none.
type Manifest struct {
	// Redacted lists what the capture removed or replaced: "device_serial_number"
	// (the DSN capability's serial, zeroed in config), "vpd" (captured only for
	// NVIDIA networking functions, vendor 0x15b3, with the serial number and board
	// UUID keywords SN and V3 replaced by pseudonyms and read-write fields zeroed),
	// "serial_number" (file not captured), "hostname" (replaced by "redacted-hostname") and, with
	// NVML facts, "gpu_uuid" (replaced by the caller, see Options.NVML).
	// Empty when captured with --no-redact.
	Redacted []string `json:"redacted"`
	// Hostname is the machine's name, recorded only when not redacted.
	Hostname string `json:"hostname,omitempty"`
	// TruncatedConfigs counts the functions whose config space was captured short
	// of the 256 bytes every function has: read without CAP_SYS_ADMIN, the kernel
	// shows only the first 64 (drivers/pci/pci-sysfs.c pci_read_config).
	TruncatedConfigs int `json:"truncated_configs"`
	// NVML is set when p2pkit/nvml.json holds the NVML facts of the machine.
	NVML bool `json:"nvml"`
	// Source names a capture that is not a p2pcheck snapshot: "rdma_topo dump" for
	// rdma-core's JSON capture read by package rdmatopo. Empty for a snapshot.
	Source string `json:"source,omitempty"`
}

// SourceRDMATopo is Manifest.Source of an rdma_topo dump.
const SourceRDMATopo = "rdma_topo dump"

// redactedItems is Manifest.Redacted of a redacted capture.
var redactedItems = []string{"device_serial_number", "vpd", "serial_number", "hostname"}

// identifying reports the attribute files a redacted capture leaves out:
// serial_number (the Device Serial Number, drivers/pci/pci-sysfs.c
// serial_number_show). The vpd attribute is captured redacted (see vpd.go).
func identifying(name string) bool { return name == "serial_number" }

// config copies the config file of a function's directory d (dir of the capture),
// with its Device Serial Number zeroed when redacting, and counts it when the kernel
// showed less than its standard 256 bytes.
func (c *capture) config(d hostfs.Root, dir string) {
	c.fileIn(d, dir, "config", captureLimit, false, func(c *capture, b []byte) {
		if len(b) < pcie.ConfigSize {
			c.manifest.TruncatedConfigs++
		}
		if c.redact {
			zeroDSN(b)
		}
	})
}

// zeroDSN zeroes the serial of every Device Serial Number capability found by
// walking the extended capability list of config space b (pcie.ParseConfig walks it
// as the kernel's pci_find_next_ext_capability does).
func zeroDSN(b []byte) {
	c, err := pcie.ParseConfig(b)
	if err != nil {
		return
	}
	for _, e := range c.ExtCapabilities {
		if e.ID == extCapIDDSN && int(e.Offset)+12 <= len(b) {
			clear(b[e.Offset+4 : e.Offset+12])
		}
	}
}

// hostFiles are the captured files where the host name can appear: the kernel
// command line (ip=...:hostname:..., hostname=) and the kernel's build host in
// /proc/version, which is this machine for a locally built kernel.
var hostFiles = []string{"proc/cmdline", "proc/version"}

// hostName reads the host name, which a redacted capture replaces in hostFiles as
// it copies them.
func (c *capture) hostName() {
	if b, err := c.src.ReadFile("proc/sys/kernel/hostname", attrLimit); err == nil {
		c.host = strings.TrimSpace(string(b))
	}
}

// finish adds the NVML facts and the manifest.
func (c *capture) finish(opt Options) {
	if c.redact {
		c.manifest.Redacted = redactedItems
	} else {
		c.manifest.Redacted = []string{}
		c.manifest.Hostname = c.host
	}
	if opt.NVML != nil {
		c.manifest.NVML = true
		if c.redact {
			c.manifest.Redacted = append(slices.Clone(c.manifest.Redacted), "gpu_uuid")
		}
		c.add(nvmlMember, &member{typ: tar.TypeReg, perm: 0o644, data: opt.NVML})
	}
	b, _ := json.MarshalIndent(c.manifest, "", "  ") // strings and numbers: it cannot fail
	c.add(manifestMember, &member{typ: tar.TypeReg, perm: 0o644, data: append(b, '\n')})
}

// ReadManifest returns the manifest of a snapshot, nil when it has none (a snapshot
// made before manifests, or a directory root).
func ReadManifest(root hostfs.Root) (*Manifest, error) {
	b, err := root.ReadFile(manifestMember, attrLimit)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("snapshot: /%s: %w", manifestMember, err)
	}
	return &m, nil
}

// RecordedNVML returns the NVML facts a snapshot recorded (a JSON document, see
// Options.NVML), nil when it has none.
func RecordedNVML(root hostfs.Root) ([]byte, error) {
	b, err := root.ReadFile(nvmlMember, procLimit)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// replaceWord replaces each occurrence of word in b that stands alone, not inside a
// longer name: the host name "vm" must not turn kvm-clock into something else.
func replaceWord(b []byte, word, with string) []byte {
	var out []byte
	rest := b
	for {
		i := bytes.Index(rest, []byte(word))
		if i < 0 {
			break
		}
		end := i + len(word)
		if (i == 0 || !nameByte(rest[i-1])) && (end == len(rest) || !nameByte(rest[end])) {
			out = append(append(out, rest[:i]...), with...)
		} else {
			out = append(out, rest[:end]...)
		}
		rest = rest[end:]
	}
	if out == nil {
		return b
	}
	return append(out, rest...)
}

// nameByte reports the bytes a host name is made of (RFC 1123 labels, dots, and the
// underscore some use).
func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_'
}
