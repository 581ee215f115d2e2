package snapshot

import (
	"fmt"
	"strings"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/pcie"
)

// vendorNVIDIANetworking is the PCI vendor of NVIDIA's networking devices (Mellanox,
// 0x15b3): ConnectX NICs and their Data Direct DMA functions.
const vendorNVIDIANetworking = "0x15b3"

// vpdSerialKeys are the VPD-R keywords a redacted capture replaces: SN, the board's
// serial number, and V3, the NVIDIA board UUID that the functions of one ConnectX
// board share (rdma-core's kernel-boot/rdma_topo matches a Data Direct function to
// its NIC by V3 and groups a board's NICs by SN).
var vpdSerialKeys = []string{"SN", "V3"}

// vpd captures the vpd attribute of one function. A redacted capture keeps it only
// for NVIDIA networking functions, whose VPD tells which NIC functions form a board
// and which NIC a Data Direct function belongs to, with the values of the serial
// keywords replaced by pseudonyms of the same length that stay equal where the
// values were equal, and the VPD-R checksum (RV) made right again; it reads no
// other function's VPD (slow, and it has hung some devices). Without redaction
// every function's vpd is captured as it is.
func (c *capture) vpd(d hostfs.Root, dir string) {
	if c.redact {
		var buf [attrLimit + 1]byte
		b, err := d.ReadBounded("vendor", dir, buf[:], false)
		if err != nil || strings.TrimSpace(string(b)) != vendorNVIDIANetworking {
			return
		}
	}
	c.fileIn(d, dir, "vpd", pcie.MaxVPDSize, true, func(c *capture, b []byte) {
		if c.redact {
			c.redactVPD(b)
		}
	})
}

// redactVPD replaces the serial keywords' values in b in place.
func (c *capture) redactVPD(b []byte) {
	v, err := pcie.ParseVPD(b)
	if err != nil {
		clear(b) // not VPD as the spec lays it out: nothing in it can be kept safely
		return
	}
	for _, f := range v.RO {
		for _, k := range vpdSerialKeys {
			if f.Key == k && len(f.Value) > 0 {
				copy(b[f.Offset:], c.pseudonym(k, string(f.Value)))
			}
		}
	}
	for _, f := range v.RW {
		clear(b[f.Offset : f.Offset+len(f.Value)]) // read-write fields: whatever the owner wrote
	}
	for _, f := range v.RO {
		if f.Key == "RV" && len(f.Value) > 0 {
			// The checksum byte makes the bytes from the start through itself sum
			// to zero (PCI Local Bus Specification 3.0, I.3.1.1).
			var sum byte
			for _, x := range b[:f.Offset] {
				sum += x
			}
			b[f.Offset] = -sum
		}
	}
}

// pseudonym returns the replacement of a serial value: "redacted-1" numbered by first
// appearance of the value, padded or cut to the value's length.
func (c *capture) pseudonym(key, value string) string {
	if c.vpdNames == nil {
		c.vpdNames = map[string]string{}
	}
	id := key + "\x00" + value
	if p, ok := c.vpdNames[id]; ok {
		return p
	}
	n := len(c.vpdNames) + 1
	p := fmt.Sprintf("redacted-%d", n)
	if len(p) > len(value) {
		p = fmt.Sprintf("%d", n)
	}
	p += strings.Repeat("0", max(0, len(value)-len(p)))
	p = p[len(p)-len(value):]
	c.vpdNames[id] = p
	return p
}

// acsApplied is the record `p2pcheck fix --apply` keeps of the ACS bits it set
// (provision.StatePath), captured so that the acs_drift check judges a snapshot as
// it judges the machine.
const acsApplied = "run/p2pcheck/acs-applied.json"

// fixState captures that record when there is one.
func (c *capture) fixState() { c.file(acsApplied, procLimit) }
