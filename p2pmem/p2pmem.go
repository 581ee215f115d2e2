// Package p2pmem allocates PCI peer-to-peer memory from user space: it maps a P2PDMA
// provider's p2pmem/allocate file (Linux 6.2 and later), which hands out pages of a
// device's BAR memory, for example an NVMe Controller Memory Buffer, from the pool the
// kernel keeps for it. Such a buffer can be the source or target of O_DIRECT reads and
// writes on NVMe, which the block layer then DMAs peer to peer.
//
// The sysfs group is documented in Documentation/ABI/testing/sysfs-bus-pci; the
// mapping is p2pmem_alloc_mmap() in drivers/pci/p2pdma.c.
package p2pmem

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/pcie"
)

// Errors. Test with errors.Is; the returned errors wrap them with the details.
var (
	// ErrNotSupported is returned where the platform cannot map p2pmem (not Linux).
	ErrNotSupported = errors.New("p2pmem: not supported on this platform")
	// ErrNotProvider means the function has no p2pmem/ group: no driver registered
	// its memory with P2PDMA (in mainline only nvme-pci does, for a CMB), or the
	// kernel was built without CONFIG_PCI_P2PDMA. It is also returned when the
	// provider went away (driver unbound) during an allocation.
	ErrNotProvider = errors.New("p2pmem: not a p2pmem provider")
	// ErrKernelTooOld means p2pmem/ exists but has no allocate file, which appeared
	// in Linux 6.2 (commit 7e9c7ef83d78).
	ErrKernelTooOld = errors.New("p2pmem: kernel has no p2pmem/allocate (Linux 6.2 or later needed)")
	// ErrPoolExhausted means the provider's pool has too little free memory for the
	// request (the kernel's -ENOMEM).
	ErrPoolExhausted = errors.New("p2pmem: pool exhausted")
)

// Provider is a PCI function with a p2pmem pool, as its sysfs directory shows it. It
// holds no resources.
type Provider struct {
	dir string

	// Size is the pool's total size in bytes (p2pmem/size).
	Size uint64
	// Available is the free part of the pool when Open read it (p2pmem/available);
	// see ReadAvailable for a fresh value.
	Available uint64
	// Published reports whether the driver published the pool for in-kernel users
	// such as nvmet (p2pmem/published). It plays no part in allocation through
	// p2pmem/allocate, which unpublished pools serve as well.
	Published bool
}

// Open reads the provider whose sysfs device directory is dir, for example
// /sys/bus/pci/devices/0000:03:00.0. It returns ErrNotProvider when dir has no
// p2pmem/ group and ErrKernelTooOld when the group has no allocate file.
func Open(dir string) (*Provider, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("p2pmem: %w", err)
	}
	group := filepath.Join(dir, "p2pmem")
	if _, err := os.Stat(group); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s has no p2pmem directory (no driver registered memory with P2PDMA, "+
			"or the kernel lacks CONFIG_PCI_P2PDMA)", ErrNotProvider, dir)
	} else if err != nil {
		return nil, fmt.Errorf("p2pmem: %w", err)
	}
	p := &Provider{dir: dir}
	var err error
	if p.Size, err = readUint(filepath.Join(group, "size")); err != nil {
		return nil, err
	}
	if p.Available, err = readUint(filepath.Join(group, "available")); err != nil {
		return nil, err
	}
	pub, err := readUint(filepath.Join(group, "published"))
	if err != nil {
		return nil, err
	}
	p.Published = pub != 0
	if _, err := os.Stat(p.allocatePath()); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrKernelTooOld, group)
	} else if err != nil {
		return nil, fmt.Errorf("p2pmem: %w", err)
	}
	return p, nil
}

// OpenAddress opens the provider at address a below root, which stands for "/":
// root/sys/bus/pci/devices/<a>.
func OpenAddress(root string, a pcie.Address) (*Provider, error) {
	return Open(filepath.Join(root, "sys", "bus", "pci", "devices", a.String()))
}

// Dir returns the provider's sysfs device directory.
func (p *Provider) Dir() string { return p.dir }

// ReadAvailable reads the pool's free bytes now (p2pmem/available).
func (p *Provider) ReadAvailable() (uint64, error) {
	return readUint(filepath.Join(p.dir, "p2pmem", "available"))
}

func (p *Provider) allocatePath() string { return filepath.Join(p.dir, "p2pmem", "allocate") }

// readUint reads a sysfs attribute holding one decimal number.
func readUint(name string) (uint64, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0, fmt.Errorf("p2pmem: %w", err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("p2pmem: parse %s: %w", name, err)
	}
	return v, nil
}

// permissionFix is appended to permission errors: p2pmem/allocate is mode 0660,
// owned by root.
const permissionFix = "p2pmem/allocate is mode 0660 and owned by root: run as root, " +
	"or give a group access with chgrp and run as a member"
