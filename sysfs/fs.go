package sysfs

import (
	"errors"
	"path"

	"github.com/p2pkit/p2pkit/hostfs"
)

// Read limits. Pseudo-files report sizes that mean nothing (0 or 4096), so nothing is
// sized from a stat: every read is bounded by one of these and a file that is longer
// is an error, not silently truncated.
const (
	// attrLimit bounds a sysfs attribute: a show() routine fills at most one page
	// (fs/sysfs/file.c sysfs_kf_seq_show, PAGE_SIZE).
	attrLimit = 4096
	// aerLimit bounds an aer_dev_* attribute: a line per error type, about 30.
	aerLimit = 4096
	// configLimit is the size of PCI Express configuration space
	// (include/uapi/linux/pci_regs.h PCI_CFG_SPACE_EXP_SIZE).
	configLimit = 4096
)

// ErrNoSysfs is returned (wrapped) by PCIRecords when the root has no readable
// /sys/bus/pci/devices: there is nothing to evaluate.
var ErrNoSysfs = errors.New("sysfs: no PCI functions to read")

// FS reads /sys beneath a [hostfs.Root]. Create one with [New]; the zero FS is not
// usable. An FS may be used from several goroutines at once.
type FS struct {
	r hostfs.Root
}

// New returns an FS reading the /sys of root.
func New(root hostfs.Root) FS { return FS{r: root} }

// Close releases the root; see [hostfs.Root.Close].
func (fsys FS) Close() error { return fsys.r.Close() }

// join joins root-relative name elements.
func join(elem ...string) string { return path.Join(elem...) }

// overBudget is the error of going past a limit of the root's Budget.
func overBudget(limit string, value int64, what string) error {
	return &hostfs.BudgetError{Limit: limit, Value: value, What: what}
}
