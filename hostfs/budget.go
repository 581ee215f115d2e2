package hostfs

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// ErrBudget is wrapped by every error that stops reading a root or a snapshot because
// it went past one of its [Budget]'s limits. The error is a [*BudgetError] naming the
// limit.
var ErrBudget = errors.New("hostfs: over budget")

// Budget bounds the work and memory of reading a root or a snapshot. Snapshots travel
// (a bug report, a stranger's file) and a --root tree may be anyone's, so both are
// read as hostile input: past any limit the read stops with a [*BudgetError] (which
// wraps [ErrBudget]) instead of running out of memory or time. Each limit is far
// above what a real machine needs; [DefaultBudget] gives the values.
//
// Snapshot archives (package snapshot):
//
//   - Bytes: decompressed bytes of the whole tar stream, every header and extension
//     record counted (PAX 'x' and 'g', GNU 'L' and 'K'), so a flood of headers costs
//     as much as data does. Default 256 MiB.
//   - Members: tree nodes a snapshot creates, members and the parent directories
//     their names imply alike. Default 250,000.
//   - MemberSize: bytes of one regular file. Default 4 MiB, the largest /proc file a
//     capture stores.
//   - Data: bytes of all regular files together, which are kept in memory.
//     Default 96 MiB.
//   - NameLen: bytes of one member name. Default 4096, the kernel's PATH_MAX
//     (include/uapi/linux/limits.h).
//   - LinkTargetLen: bytes of one link target. Default 4096, PATH_MAX.
//   - PathDepth: elements of one member name. Default 300: a function at the bottom
//     of the deepest PCI hierarchy (PCIDepth bridges) and its attribute files fit.
//
// Link resolution in a snapshot (the tree resolves links itself):
//
//   - LinkElements: path elements one resolution may visit, the elements each link
//     target splices in counted, not only the hops (at most 8). Default 4096.
//   - WalkElements: path elements all resolutions together may visit while the
//     snapshot is read. Default 16 million.
//
// Any root:
//
//   - PCIDepth: bridges above one function. A PCI domain has 256 bus numbers and
//     every bridge below a root bus takes one (PCI-to-PCI Bridge Architecture
//     Specification, secondary bus number), so no real chain is deeper. Default 256.
//   - Functions: PCI functions under /sys/bus/pci/devices. Default 100,000; one
//     domain holds at most 65,536 (256 buses × 32 devices × 8 functions).
//   - RunBytes: bytes one run reads from every file, below every root and named by
//     a user alike, counted by a [Meter] the run shares. Default 2 GiB: a
//     100,000-function tree is read in about 500 MB and a libnccl.so is a few
//     hundred; scanning 2 GiB takes about a second.
type Budget struct {
	Bytes         int64
	Members       int
	MemberSize    int64
	Data          int64
	NameLen       int
	LinkTargetLen int
	PathDepth     int
	LinkElements  int
	WalkElements  int64
	PCIDepth      int
	Functions     int
	RunBytes      int64
}

// DefaultBudget is the Budget of [Open] and of package snapshot's Open and Read.
var DefaultBudget = Budget{
	Bytes:         256 << 20,
	Members:       250_000,
	MemberSize:    MaxFileSize,
	Data:          96 << 20,
	NameLen:       4096,
	LinkTargetLen: 4096,
	PathDepth:     300,
	LinkElements:  4096,
	WalkElements:  16_000_000,
	PCIDepth:      256,
	Functions:     100_000,
	RunBytes:      2 << 30,
}

// BudgetError says which limit of a [Budget] a read went past.
type BudgetError struct {
	Limit string // the Budget field: "NameLen"
	Value int64  // its value
	What  string // what it counts: "bytes in a member name"
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("over budget: more than %d %s (Budget.%s)", e.Value, e.What, e.Limit)
}

// Is makes errors.Is(err, ErrBudget) hold.
func (e *BudgetError) Is(target error) bool { return target == ErrBudget }

func overBudget(limit string, value int64, what string) error {
	return &BudgetError{Limit: limit, Value: value, What: what}
}

// walkBudget counts the path elements link resolution visits in a snapshot, shared by
// every tree made from one snapshot.
type walkBudget struct {
	used    atomic.Int64
	total   int64
	perWalk int
}

// spend records n elements of one resolution that has visited done so far.
func (w *walkBudget) spend(done, n int) error {
	if w == nil {
		return nil
	}
	if done+n > w.perWalk {
		return overBudget("LinkElements", int64(w.perWalk), "path elements in one link resolution")
	}
	if w.used.Add(int64(n)) > w.total {
		return overBudget("WalkElements", w.total, "path elements in all link resolutions")
	}
	return nil
}
