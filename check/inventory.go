package check

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/pcie"
)

// The words for the kinds of devices of interest, one per kind, the same in the
// report's header and checks, the JSON "kind" field, the Prometheus "kind"
// label and the inventory: a NIC that does RDMA (an RDMA device in
// /sys/class/infiniband, or the InfiniBand class) is an "RDMA NIC", one that
// does not (virtio-net, a management port) an "Ethernet NIC".
const (
	KindGPU         = "GPU"
	KindRDMANIC     = "RDMA NIC"
	KindEthernetNIC = "Ethernet NIC"
	KindNVMe        = "NVMe"
	KindAccelerator = "accelerator"
	KindP2PMem      = "p2pmem"
	KindOther       = "device"
)

// Kind returns the word for d's kind ([KindGPU], [KindRDMANIC], ...).
func Kind(d *pcie.Device) string {
	switch {
	case d.IsGPU():
		return KindGPU
	case d.IsNIC() && isRDMANIC(d):
		return KindRDMANIC
	case d.IsNIC():
		return KindEthernetNIC
	case d.IsNVMe():
		return KindNVMe
	case d.IsAccelerator():
		return KindAccelerator
	case d.P2PMem != nil:
		return KindP2PMem
	}
	return KindOther
}

// Expectation is how many devices of each kind a node must have at least
// (--expect gpus=8,rdma-nics=8,nvme=2); a nil count is not judged.
type Expectation struct {
	GPUs, RDMANICs, NVMe *int
}

// expectKeys are the keys of an expectation in the order it prints them, with
// the kind each counts.
var expectKeys = []struct{ key, kind string }{
	{"gpus", KindGPU}, {"rdma-nics", KindRDMANIC}, {"nvme", KindNVMe},
}

// count returns the pointer of the count key names.
func (e *Expectation) count(key string) **int {
	switch key {
	case "gpus":
		return &e.GPUs
	case "rdma-nics":
		return &e.RDMANICs
	case "nvme":
		return &e.NVMe
	}
	return nil
}

// maxExpected bounds an expected count: no node has this many devices of one
// kind (a crafted snapshot can, and is judged against it as any other).
const maxExpected = 1 << 16

// ErrExpectation is wrapped by every error about an expectation.
var ErrExpectation = errors.New("check: expectation")

// ParseExpectation parses "gpus=N,rdma-nics=N,nvme=N" as --expect and the
// configuration file's "expect" key take it: any of the three keys, each once,
// with a whole number from 0 to 65536; blanks around names and values are
// ignored. An empty list is an error.
func ParseExpectation(s string) (Expectation, error) {
	var e Expectation
	n := 0
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		p := e.count(k)
		switch {
		case !ok:
			return Expectation{}, fmt.Errorf("%w: want KIND=N, not %q (kinds: gpus, rdma-nics, nvme)", ErrExpectation, clipText(item))
		case p == nil:
			return Expectation{}, fmt.Errorf("%w: unknown kind %q (kinds: gpus, rdma-nics, nvme)", ErrExpectation, clipText(k))
		case *p != nil:
			return Expectation{}, fmt.Errorf("%w: %s given twice", ErrExpectation, k)
		}
		c, err := strconv.Atoi(v)
		if err != nil || c < 0 || c > maxExpected || strings.HasPrefix(v, "+") {
			return Expectation{}, fmt.Errorf("%w: %s wants a whole number from 0 to %d, not %q", ErrExpectation, k, maxExpected, clipText(v))
		}
		*p = &c
		n++
	}
	if n == 0 {
		return Expectation{}, fmt.Errorf("%w: empty list (want e.g. gpus=8,rdma-nics=8,nvme=2)", ErrExpectation)
	}
	return e, nil
}

// String formats e as ParseExpectation reads it.
func (e Expectation) String() string {
	var parts []string
	for _, k := range expectKeys {
		if c := *e.count(k.key); c != nil {
			parts = append(parts, k.key+"="+strconv.Itoa(*c))
		}
	}
	return strings.Join(parts, ",")
}

// clipText keeps what an error quotes from hostile input short.
func clipText(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}

// inventory counts the devices of interest of each kind an expectation names.
type inventory struct {
	gpus, nvidiaGPUs, rdmaNICs, nvme, p2pmem int
}

func (f *Facts) inventory() inventory {
	var inv inventory
	for _, d := range f.devices {
		switch Kind(d) {
		case KindGPU:
			inv.gpus++
			if d.Vendor == pcie.VendorNVIDIA {
				inv.nvidiaGPUs++
			}
		case KindRDMANIC:
			inv.rdmaNICs++
		case KindNVMe:
			inv.nvme++
		}
		if d.P2PMem != nil {
			inv.p2pmem++
		}
	}
	return inv
}

func (inv inventory) of(key string) int {
	switch key {
	case "gpus":
		return inv.gpus
	case "rdma-nics":
		return inv.rdmaNICs
	}
	return inv.nvme
}

// String is what the inventory line shows: "8 GPU, 8 RDMA NIC, 2 NVMe".
func (inv inventory) String() string {
	return fmt.Sprintf("%d %s, %d %s, %d %s", inv.gpus, KindGPU, inv.rdmaNICs, KindRDMANIC, inv.nvme, KindNVMe)
}

// lacks says what capability c needs and inv does not have, "" when it has
// something to judge: p2p two GPUs, gdr a GPU and an RDMA NIC, gdrcopy an
// NVIDIA GPU, nvme-p2p an NVMe controller and a peer for it (a GPU, an RDMA
// NIC, another NVMe controller or a p2pmem provider).
func (inv inventory) lacks(c Capability) string {
	switch c {
	case CapP2P:
		if inv.gpus < 2 {
			return fmt.Sprintf("p2p needs 2 GPUs, found %d", inv.gpus)
		}
	case CapGDR:
		if inv.gpus == 0 || inv.rdmaNICs == 0 {
			return fmt.Sprintf("gdr needs a GPU and an RDMA NIC, found %d GPU, %d RDMA NIC", inv.gpus, inv.rdmaNICs)
		}
	case CapGDRCopy:
		if inv.nvidiaGPUs == 0 {
			return "gdrcopy needs an NVIDIA GPU, found none"
		}
	case CapNVMeP2P:
		if inv.nvme == 0 || inv.gpus+inv.rdmaNICs+inv.nvme+inv.p2pmem < 2 {
			return fmt.Sprintf("nvme-p2p needs an NVMe controller and a peer for it, found %d NVMe", inv.nvme)
		}
	}
	return ""
}

// inventoryFind is the first remediation of missing devices.
const inventoryFind = "find the missing devices: lspci -nn; dmesg | grep -i -e 'fallen off the bus' -e 'link down' -e AER; " +
	"reseat, enable the slot in the BIOS or replace what the firmware no longer enumerates; an RDMA NIC needs its RDMA driver (mlx5_ib)"

// checkInventory judges the devices the node has. With an expectation
// (Inputs.Expect, --expect) fewer devices of a kind than expected fail the node
// whatever it is for, naming the kinds missing and how many were found; more
// are fine. Without one it is the one check that looks at the requirements
// (Inputs.Require): a required capability with no devices to judge (see
// inventory.lacks) leaves the node unknown, exit 3, so that a node whose GPUs
// fell off the bus, or a VM without any, is never reported ready. The counts
// are of the devices of interest as /sys/bus/pci/devices shows them (class,
// /sys/class/infiniband), physical functions only.
func checkInventory(f *Facts) Result {
	inv := f.inventory()
	r := Result{Refs: []string{docRef("inventory")}, Observed: inv.String(),
		Evidence: []Evidence{{Source: "/sys/bus/pci/devices/*/class, /sys/class/infiniband", Value: inv.String()}}}
	if e := f.Expect; e != nil {
		return inventoryExpected(r, inv, *e)
	}
	var lacking []string
	for _, c := range requirements(f.Require) {
		if why := inv.lacks(c); why != "" {
			lacking = append(lacking, why)
			r.Blocks = append(r.Blocks, c)
			r.Subjects = append(r.Subjects, string(c))
		}
	}
	if len(lacking) == 0 {
		r.Status = Pass
		r.Summary = inv.String() + ": every required capability has devices to judge (no --expect: the counts themselves are not judged)"
		return r
	}
	r.Status = Unknown
	r.Summary = "nothing to judge: " + strings.Join(lacking, "; ") + " (without --expect, whether the node should have them is unknown)"
	r.Expected = "devices for every required capability (" + capabilityList(requirements(f.Require)) + "), or --expect"
	r.Remediation = []string{
		"say what the node is built with, --expect gpus=N,rdma-nics=N,nvme=N (check_p2p_static -e; expect = in /etc/p2pcheck/p2pcheck.conf), " +
			"or --require only what it is for",
		inventoryFind,
	}
	return r
}

func inventoryExpected(r Result, inv inventory, e Expectation) Result {
	r.Expected = "at least " + e.String() + " (--expect)"
	var missing, met []string
	for _, k := range expectKeys {
		want := *e.count(k.key)
		if want == nil {
			continue
		}
		got := inv.of(k.key)
		switch {
		case got < *want:
			missing = append(missing, fmt.Sprintf("%d of %d %s", got, *want, k.kind))
			r.Subjects = append(r.Subjects, k.kind)
			r.Findings = append(r.Findings, Finding{Subject: k.kind, Status: Fail,
				Message: fmt.Sprintf("%d %s missing: %d found, %d expected", *want-got, k.kind, got, *want)})
		case got > *want:
			met = append(met, fmt.Sprintf("%d %s (%d expected; more is fine)", got, k.kind, *want))
		default:
			met = append(met, fmt.Sprintf("%d %s", got, k.kind))
		}
	}
	if len(missing) > 0 {
		r.Status = Fail
		r.Summary = "devices missing: found " + strings.Join(missing, ", ") + " (--expect " + e.String() + ")"
		r.Remediation = []string{inventoryFind, "if the node is built with fewer, correct --expect (expect = in /etc/p2pcheck/p2pcheck.conf)"}
		return r
	}
	r.Status = Pass
	r.Summary = "as expected: " + strings.Join(met, ", ")
	return r
}
