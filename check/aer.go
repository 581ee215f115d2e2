package check

import "github.com/p2pkit/p2pkit/pcie"

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
