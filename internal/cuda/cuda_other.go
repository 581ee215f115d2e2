//go:build !cgo || !linux

package cuda

import (
	"fmt"
	"runtime"

	"github.com/p2pkit/p2pkit/pcie"
)

// errUnsupported says why this build cannot reach the driver.
var errUnsupported = func() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("%w on %s", ErrNotSupported, runtime.GOOS)
	}
	return fmt.Errorf("%w: built without cgo", ErrNotSupported)
}()

// Init reports that this build has no CUDA driver access.
func Init() error { return errUnsupported }

// DriverVersion reports that this build has no CUDA driver access.
func DriverVersion() (int, error) { return 0, errUnsupported }

// DeviceCount reports that this build has no CUDA driver access.
func DeviceCount() (int, error) { return 0, errUnsupported }

// DeviceGet reports that this build has no CUDA driver access.
func DeviceGet(int) (Device, error) { return Device{}, errUnsupported }

// Name reports that this build has no CUDA driver access.
func (Device) Name() (string, error) { return "", errUnsupported }

// PCIBusID reports that this build has no CUDA driver access.
func (Device) PCIBusID() (pcie.Address, error) { return pcie.Address{}, errUnsupported }

// Attribute reports that this build has no CUDA driver access.
func (Device) Attribute(Attribute) (int, error) { return 0, errUnsupported }

// TotalMem reports that this build has no CUDA driver access.
func (Device) TotalMem() (uint64, error) { return 0, errUnsupported }

// CanAccessPeer reports that this build has no CUDA driver access.
func (Device) CanAccessPeer(Device) (bool, error) { return false, errUnsupported }

// RetainPrimaryContext reports that this build has no CUDA driver access.
func (Device) RetainPrimaryContext() (*Context, error) { return nil, errUnsupported }

// Release reports that this build has no CUDA driver access.
func (*Context) Release() error { return errUnsupported }

// SetCurrent reports that this build has no CUDA driver access.
func (*Context) SetCurrent() error { return errUnsupported }

// Synchronize reports that this build has no CUDA driver access.
func (*Context) Synchronize() error { return errUnsupported }

// MemAlloc reports that this build has no CUDA driver access.
func (*Context) MemAlloc(uint64) (uint64, error) { return 0, errUnsupported }

// MemFree reports that this build has no CUDA driver access.
func (*Context) MemFree(uint64) error { return errUnsupported }

// ExportDMABUF reports that this build has no CUDA driver access.
func (*Context) ExportDMABUF(uint64, uint64, bool) (int, error) { return -1, errUnsupported }

// SetSyncMemops reports that this build has no CUDA driver access.
func (*Context) SetSyncMemops(uint64) error { return errUnsupported }

// MemcpyHtoD reports that this build has no CUDA driver access.
func (*Context) MemcpyHtoD(uint64, []byte) error { return errUnsupported }

// MemcpyDtoH reports that this build has no CUDA driver access.
func (*Context) MemcpyDtoH([]byte, uint64) error { return errUnsupported }

// MemsetD8 reports that this build has no CUDA driver access.
func (*Context) MemsetD8(uint64, byte, uint64) error { return errUnsupported }

// HostAlloc reports that this build has no CUDA driver access.
func (*Context) HostAlloc(int) ([]byte, error) { return nil, errUnsupported }

// HostFree reports that this build has no CUDA driver access.
func (*Context) HostFree([]byte) error { return errUnsupported }

// EnablePeerAccess reports that this build has no CUDA driver access.
func (*Context) EnablePeerAccess(*Context) error { return errUnsupported }

// MemcpyPeer reports that this build has no CUDA driver access.
func MemcpyPeer(*Context, uint64, *Context, uint64, uint64) error { return errUnsupported }

// BuiltIn says whether this build can reach the CUDA driver (cgo and Linux).
const BuiltIn = false
