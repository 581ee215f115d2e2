package check

import (
	"fmt"

	"github.com/p2pkit/p2pkit/pcie"
)

// DefaultAERThreshold is how many correctable errors, new since the previous
// run or since boot when there is none, make aer_errors warn.
const DefaultAERThreshold = 100

// AERPolicy says how aer_errors judges the cumulative AER counters.
type AERPolicy struct {
	// Previous holds the counters of the previous run by function (read back
	// from its --prometheus textfile); nil when unknown. A function missing
	// from it is judged on its counts since boot.
	Previous map[pcie.Address]pcie.AERCounts
	// Threshold is the correctable-error count that warns; 0 means
	// DefaultAERThreshold.
	Threshold uint64
}

func (p AERPolicy) threshold() uint64 {
	if p.Threshold == 0 {
		return DefaultAERThreshold
	}
	return p.Threshold
}

// aerGrowth returns the errors counted since prev. A counter lower than
// before was reset (a reboot, or the function was removed and found again),
// so all of its count is new.
func aerGrowth(cur, prev pcie.AERCounts) pcie.AERCounts {
	grow := func(c, p uint64) uint64 {
		if c < p {
			return c
		}
		return c - p
	}
	return pcie.AERCounts{Correctable: grow(cur.Correctable, prev.Correctable), NonFatal: grow(cur.NonFatal, prev.NonFatal), Fatal: grow(cur.Fatal, prev.Fatal)}
}

// checkAER judges the AER error counters of the functions on peer paths
// (aer_dev_correctable, aer_dev_nonfatal, aer_dev_fatal: drivers/pci/pcie/aer.c
// aer_stats_attrs, since Linux 4.19 for every AER-capable function, whoever
// owns AER). The counters are cumulative since boot, so an old burst says
// little: with the previous run's counts (Inputs.AER.Previous, from the
// --prometheus textfile) the check judges their growth, where any new
// uncorrectable error fails and correctable ones warn from the threshold up;
// without them it can only warn, once a count since boot reaches its
// threshold. A link that retrains or replays shows there first; Xid 79 follows
// fatal errors.
func checkAER(f *Facts) Result {
	r := Result{Status: Skip, Refs: []string{docRef("aer_errors"), "linux drivers/pci/pcie/aer.c aer_stats_attrs", "linux Documentation/PCI/pcieaer-howto.rst",
		"linux Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats"}}
	devs := f.pathDevices()
	if len(devs) == 0 {
		r.Summary = "no GPU, RDMA NIC or NVMe controller"
		return r
	}
	th := f.AER.threshold()
	blocks := f.pathBlocks()
	counted, compared := 0, 0
	var cor, nonFatal, fatal uint64
	for _, d := range devs {
		a := d.AER
		if a == nil {
			continue
		}
		counted++
		cor, nonFatal, fatal = cor+a.Correctable, nonFatal+a.NonFatal, fatal+a.Fatal
		subj := d.Address.String()
		st, msg := Pass, ""
		if prev, ok := f.AER.Previous[d.Address]; ok {
			compared++
			g := aerGrowth(*a, prev)
			switch {
			case g.Fatal > 0 || g.NonFatal > 0:
				st = Fail
			case g.Correctable >= th:
				st = Warn
			}
			msg = fmt.Sprintf("%d correctable, %d non-fatal, %d fatal new error(s) since the previous run (%d, %d, %d since boot)",
				g.Correctable, g.NonFatal, g.Fatal, a.Correctable, a.NonFatal, a.Fatal)
		} else {
			if a.Fatal > 0 || a.NonFatal > 0 || a.Correctable >= th {
				st = Warn
			}
			msg = fmt.Sprintf("%d correctable, %d non-fatal, %d fatal error(s) since boot, no previous run to compare with", a.Correctable, a.NonFatal, a.Fatal)
		}
		if st == Pass {
			continue
		}
		r.Subjects = append(r.Subjects, subj)
		r.Findings = append(r.Findings, Finding{Subject: subj, Status: st, Message: msg})
		r.Evidence = append(r.Evidence, Evidence{Source: "/sys/bus/pci/devices/" + subj + "/aer_dev_{correctable,nonfatal,fatal}",
			Value: fmt.Sprintf("TOTAL_ERR_COR %d, TOTAL_ERR_NONFATAL %d, TOTAL_ERR_FATAL %d", a.Correctable, a.NonFatal, a.Fatal)})
		if st == Fail {
			r.addBlocks(blocks[d]...)
		}
		r.Status = worse(r.Status, st)
	}
	if counted == 0 {
		r.Summary = "no AER error counters on the functions of peer paths (no AER capability, a kernel before 4.19, or one built without CONFIG_PCIEAER)"
		return r
	}
	r.Observed = fmt.Sprintf("%d correctable, %d non-fatal, %d fatal error(s) since boot on %d function(s) with counters; %d compared with the previous run",
		cor, nonFatal, fatal, counted, compared)
	r.Expected = fmt.Sprintf("no new uncorrectable error since the previous run and fewer than %d new correctable ones (without a previous run: since boot)", th)
	switch r.Status {
	case Skip:
		r.Status = Pass
		r.Summary = fmt.Sprintf("no AER errors worth attention on the %d function(s) of peer paths", counted)
		if compared < counted {
			r.Summary += fmt.Sprintf(" (%d judged on counts since boot: pass --prometheus FILE on every run to judge growth)", counted-compared)
		}
	case Warn:
		r.Summary = fmt.Sprintf("PCIe errors on %d function(s) of peer paths", len(r.Subjects))
		r.Remediation = []string{"check dmesg for AER reports; if the counts keep growing, reseat or replace the card or riser and check the slot's link (p2pcheck topo); run p2pcheck with --prometheus FILE each time to judge growth between runs"}
	case Fail:
		r.Summary = fmt.Sprintf("new uncorrectable PCIe errors on %d function(s) of peer paths since the previous run", len(r.Subjects))
		r.Remediation = []string{"uncorrectable errors corrupt or drop transfers: check dmesg for AER and Xid 79 reports, then reseat or replace the card; do not run P2P workloads on this path until the counts stop growing"}
	}
	return r
}
