package sysfs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/pcie"
)

// ErrRefusedWrite is returned (wrapped) by [WriteACSControl] for a write it will not
// make: anything but bits of the ACS Control register of an ACS capability that is
// where the caller says it is.
var ErrRefusedWrite = errors.New("sysfs: config write refused")

// acsControlBits are the defined bits of ACS Control (include/uapi/linux/pci_regs.h
// PCI_ACS_SV through PCI_ACS_DT).
const acsControlBits = 0x007f

// ACSControlWrite is what one read-modify-write of ACS Control did.
type ACSControlWrite struct {
	Address pcie.Address
	// Register is the offset of ACS Control in configuration space: the ACS
	// capability's offset plus 6.
	Register uint16
	// Before is the register as read before the write, After as read back after it
	// (equal to Before when nothing was written).
	Before, After uint16
	// Written is false when the bits of the mask already held the value.
	Written bool
}

// WriteACSControl sets the bits of mask in the ACS Control register of the function
// at addr to those of value, through /sys/bus/pci/devices/<addr>/config below root,
// keeping every other bit: the read-modify-write that setpci's
// "ECAP_ACS+6.w=<value>:<mask>" does. The register is read first and written only
// when a bit of mask differs from value; it is then read back. The kernel's
// pci_write_config() (drivers/pci/pci-sysfs.c) turns the aligned two-byte write into
// one configuration write of the word.
//
// It refuses (ErrRefusedWrite) unless the file is a regular file inside root, mask
// holds only defined ACS Control bits and value none outside mask, and the function's
// extended capability list, read from the same file, has its ACS capability at
// capOffset: nothing but that one register is ever written. Writing needs root on a
// live machine.
func WriteACSControl(root string, addr pcie.Address, capOffset, mask, value uint16) (ACSControlWrite, error) {
	w := ACSControlWrite{Address: addr, Register: capOffset + 6}
	if mask == 0 || mask&^acsControlBits != 0 || value&^mask != 0 {
		return w, fmt.Errorf("%w: %s: mask %#04x, value %#04x is not a set of ACS Control bits", ErrRefusedWrite, addr, mask, value)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return w, fmt.Errorf("sysfs: root: %w", err)
	}
	defer r.Close()
	name := join("sys/bus/pci/devices", addr.String(), "config")
	f, err := r.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return w, hostfs.PathError("open", name, err)
	}
	defer f.Close()
	if err := checkACSAt(f, name, capOffset); err != nil {
		return w, err
	}
	if w.Before, err = readWord(f, int64(w.Register)); err != nil {
		return w, hostfs.PathError("read", name, err)
	}
	w.After = w.Before
	if w.Before&mask == value {
		return w, nil
	}
	var b [2]byte
	binary.LittleEndian.PutUint16(b[:], w.Before&^mask|value)
	if _, err := f.WriteAt(b[:], int64(w.Register)); err != nil {
		return w, hostfs.PathError("write", name, err)
	}
	w.Written = true
	if w.After, err = readWord(f, int64(w.Register)); err != nil {
		return w, hostfs.PathError("read", name, err)
	}
	return w, nil
}

// checkACSAt refuses a config file that is not a regular file or whose extended
// capability list has no ACS capability at capOffset.
func checkACSAt(f *os.File, name string, capOffset uint16) error {
	st, err := f.Stat()
	if err != nil {
		return hostfs.PathError("stat", name, err)
	}
	if !st.Mode().IsRegular() {
		return hostfs.PathError("open", name, fmt.Errorf("%w: %w", ErrRefusedWrite, hostfs.ErrNotFile))
	}
	_, c, err := pcie.ReadConfig(f, int(min(st.Size(), configLimit)))
	if err != nil {
		return hostfs.PathError("read", name, err)
	}
	if c.ACS == nil || c.ACS.Offset != capOffset {
		return hostfs.PathError("write", name, fmt.Errorf("%w: no ACS capability at %#x", ErrRefusedWrite, capOffset))
	}
	return nil
}

// readWord reads the little-endian 16-bit register at off.
func readWord(r io.ReaderAt, off int64) (uint16, error) {
	var b [2]byte
	if n, err := r.ReadAt(b[:], off); n < 2 {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, err
	}
	return binary.LittleEndian.Uint16(b[:]), nil
}
