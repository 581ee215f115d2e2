package check

import (
	"fmt"
	"slices"
	"strings"

	"github.com/p2pkit/p2pkit/pcie"
)

// checkMaxPayloadSize judges the Max Payload Size of the link of every GPU and
// RDMA NIC on a peer path: the largest TLP payload either end may send, set in
// DevCtl and bounded by what DevCap says each end supports
// (include/uapi/linux/pci_regs.h PCI_EXP_DEVCTL_PAYLOAD, PCI_EXP_DEVCAP_PAYLOAD).
// A link whose setting is below what both ends support moves DMA in smaller
// TLPs than it could, and warns; a device set above its port is the mismatch the
// kernel's pci_configure_mps() (drivers/pci/probe.c) reports, and warns too. The
// kernel sets 128 bytes on purpose under pci=pcie_bus_peer2peer
// (pcie_bus_configure_settings() in drivers/pci/probe.c, pcie_bus_config in
// drivers/pci/pci.c pci_setup()), so that a peer never receives a TLP larger
// than it accepts: a link at 128 there is explained, not a warning. A function
// without a link (an RCiEP) or without a port above it is shown, not judged.
// Registers that could not be read are unknown.
func checkMaxPayloadSize(f *Facts) Result {
	r := Result{Refs: []string{docRef("max_payload_size"),
		"linux include/uapi/linux/pci_regs.h PCI_EXP_DEVCAP_PAYLOAD, PCI_EXP_DEVCTL_PAYLOAD",
		"linux drivers/pci/probe.c pcie_bus_configure_settings(), pci_configure_mps()"}}
	var devs []*pcie.Device
	for _, d := range f.pathDevices() {
		if (d.IsGPU() || isRDMANIC(d)) && !d.IsVF() {
			devs = append(devs, d) // a VF's Max_Payload_Size is its PF's (RsvdP in the VF)
		}
	}
	if len(devs) == 0 {
		r.Status, r.Summary = Skip, "no GPU or RDMA NIC on a peer path"
		return r
	}
	peer2peer := f.peer2peerMPS()
	blocks := f.pathBlocks()
	r.Status = Pass
	judged, explained := 0, 0
	var unknown []string
	for _, d := range devs {
		l, st := payloadOf(d)
		switch st {
		case payloadUnread:
			unknown = append(unknown, d.Address.String())
			r.addBlocks(blocks[d]...)
			r.Findings = append(r.Findings, Finding{Subject: d.Address.String(), Status: Unknown,
				Message: kind(d) + " Max Payload Size or its port's could not be read (DevCap, DevCtl of the PCI Express capability)"})
			continue
		case payloadNone:
			continue
		}
		r.Evidence = append(r.Evidence, l.evidence())
		if l.port == nil {
			continue
		}
		judged++
		msg := l.judge()
		switch {
		case msg == "":
			continue
		case peer2peer && l.runs() == pcieMinPayload:
			explained++
			r.Findings = append(r.Findings, Finding{Subject: d.Address.String(), Status: Pass,
				Message: kind(d) + " " + msg + ": set on purpose by pci=pcie_bus_peer2peer, which gives every device 128 bytes so that no peer receives a TLP larger than it accepts"})
			continue
		}
		r.Status = worse(r.Status, Warn)
		r.Subjects = append(r.Subjects, d.Address.String())
		r.Findings = append(r.Findings, Finding{Subject: d.Address.String(), Status: Warn, Message: kind(d) + " " + msg})
	}
	summariseMPS(&r, judged, explained, unknown)
	if f.Hypervisor() && r.Status != Skip {
		r.Summary += " (virtual topology: the host's physical links may differ)"
	}
	return r
}

// summariseMPS words the result of checkMaxPayloadSize over judged links, of
// which explained run 128 bytes under pci=pcie_bus_peer2peer, and the unknown ones.
func summariseMPS(r *Result, judged, explained int, unknown []string) {
	switch {
	case len(unknown) > 0:
		r.Status = Unknown
		r.Summary = fmt.Sprintf("the Max Payload Size of %d GPU or RDMA NIC link(s) could not be read", len(unknown))
		if n := len(r.Subjects); n > 0 {
			r.Summary += fmt.Sprintf("; %d of the %d known run below what both ends support", n, judged)
		}
		r.Subjects = append(r.Subjects, unknown...)
		r.Remediation = []string{"run p2pcheck as root (CAP_SYS_ADMIN) to read DevCap and DevCtl of " + strings.Join(unknown, ", ") +
			" and of their ports from config space (lspci -vvv shows them as MaxPayload)"}
	case judged == 0:
		r.Status, r.Summary = Skip, "no GPU or RDMA NIC link with a port above it on the peer paths"
	case r.Status == Pass:
		r.Summary = fmt.Sprintf("%d GPU and RDMA NIC link(s) run the largest Max Payload Size both ends support", judged)
		if explained > 0 {
			r.Summary += fmt.Sprintf("; %d run 128 bytes set on purpose by pci=pcie_bus_peer2peer", explained)
		}
	default:
		r.Summary = fmt.Sprintf("%d of %d GPU and RDMA NIC link(s) run a Max Payload Size below what both ends support, or above their port's", len(r.Subjects), judged)
		r.Expected = "both ends of each link set to the largest Max Payload Size both support"
		r.Remediation = []string{"set the PCIe Max Payload Size to Auto (the largest supported) in the firmware setup, or boot with pci=pcie_bus_safe so the kernel sets the largest every device below each root port supports (drivers/pci/probe.c pcie_bus_configure_settings)"}
	}
}

// pcieMinPayload is the smallest Max Payload Size, in bytes, every function
// supports and pci=pcie_bus_peer2peer sets.
const pcieMinPayload = 128

// peer2peerMPS reports whether the kernel was booted with pci=pcie_bus_peer2peer
// as the last of the pcie_bus_* options, the one pci_setup() (drivers/pci/pci.c)
// leaves in pcie_bus_config.
func (f *Facts) peer2peerMPS() bool {
	c := f.Node.Platform.Cmdline
	if c == nil {
		return false
	}
	opts := c.PCI()
	for _, o := range slices.Backward(opts) {
		switch o.Name {
		case "pcie_bus_tune_off", "pcie_bus_safe", "pcie_bus_perf":
			return false
		case "pcie_bus_peer2peer":
			return true
		}
	}
	return false
}

// payloadLink is the Max Payload Size of a device and of the port above it
// (nil when it has no link or no port is visible), in bytes.
type payloadLink struct {
	dev, port *pcie.Device
	devCap    int // DevCap Max_Payload_Size Supported
	devSet    int // DevCtl Max_Payload_Size
	portCap   int
	portSet   int
}

// payloadState says whether payloadOf could read a device's Max Payload Size.
type payloadState int

const (
	payloadKnown  payloadState = iota
	payloadUnread              // config space not read far enough, or a reserved encoding
	payloadNone                // conventional PCI: no PCI Express capability
)

// payloadOf reads the Max Payload Size of d and of its port.
func payloadOf(d *pcie.Device) (payloadLink, payloadState) {
	c := d.Config
	switch {
	case c == nil || !c.CapsKnown:
		return payloadLink{}, payloadUnread
	case c.Express == nil:
		return payloadLink{}, payloadNone
	case c.Express.MaxPayload == 0 || c.Express.MaxPayloadSupported == 0:
		return payloadLink{}, payloadUnread
	}
	l := payloadLink{dev: d, devCap: c.Express.MaxPayloadSupported, devSet: c.Express.MaxPayload}
	p := d.Parent
	if !c.Express.HasLink || p == nil {
		return l, payloadKnown
	}
	pc := p.Config
	if pc == nil || !pc.CapsKnown || pc.Express == nil || pc.Express.MaxPayload == 0 || pc.Express.MaxPayloadSupported == 0 {
		return payloadLink{}, payloadUnread
	}
	l.port, l.portCap, l.portSet = p, pc.Express.MaxPayloadSupported, pc.Express.MaxPayload
	return l, payloadKnown
}

// best is the largest Max Payload Size both ends support.
func (l payloadLink) best() int { return min(l.devCap, l.portCap) }

// runs is the largest payload the link carries both ways.
func (l payloadLink) runs() int { return min(l.devSet, l.portSet) }

// judge words what is wrong with the link, "" when nothing is.
func (l payloadLink) judge() string {
	switch {
	case l.devSet > l.portSet:
		return fmt.Sprintf("sends up to %d-byte payloads but its port %s accepts %d: set both ends alike (the kernel's pci_configure_mps() reports this mismatch)",
			l.devSet, l.port.Address, l.portSet)
	case l.runs() < l.best():
		return fmt.Sprintf("runs a Max Payload Size of %d bytes, both ends support %d (port %s set to %d): DMA moves in smaller TLPs than it could",
			l.devSet, l.best(), l.port.Address, l.portSet)
	}
	return ""
}

// evidence is the registers read for the link.
func (l payloadLink) evidence() Evidence {
	a := l.dev.Address.String()
	v := fmt.Sprintf("%s DevCtl %d of DevCap %d bytes", kind(l.dev), l.devSet, l.devCap)
	switch {
	case l.port != nil:
		v += fmt.Sprintf("; port %s DevCtl %d of DevCap %d bytes", l.port.Address, l.portSet, l.portCap)
	case !l.dev.Config.Express.HasLink:
		v += "; no link (root complex integrated): not judged"
	default:
		v += "; no port above it visible: not judged"
	}
	return Evidence{Source: "/sys/bus/pci/devices/" + a + "/config (PCI Express capability: DevCap, DevCtl Max_Payload_Size)", Value: v}
}
