package node

import (
	"strings"

	"github.com/p2pkit/p2pkit/procfs"
	"github.com/p2pkit/p2pkit/sysfs"
)

// The fact types of a Platform, named in the model so that the packages that
// judge facts (check) need not import the readers (procfs, sysfs) that make
// them. Each is an alias: the reader's value, under the model's name.
type (
	// IOMMUDomainType is an IOMMU group's default domain type (sysfs).
	IOMMUDomainType = sysfs.IOMMUDomainType
	// ConfigValue is a kernel configuration option's value (procfs).
	ConfigValue = procfs.ConfigValue
	// DevNode describes a device node under /dev (procfs).
	DevNode = procfs.DevNode
)

// IOMMU default domain types (sysfs).
const (
	IOMMUUnknown   = sysfs.IOMMUUnknown
	IOMMUBlocked   = sysfs.IOMMUBlocked
	IOMMUIdentity  = sysfs.IOMMUIdentity
	IOMMUUnmanaged = sysfs.IOMMUUnmanaged
	IOMMUDMA       = sysfs.IOMMUDMA
	IOMMUDMAFQ     = sysfs.IOMMUDMAFQ
)

// Kernel configuration values (procfs).
const (
	ConfigUnknown = procfs.ConfigUnknown
	ConfigNo      = procfs.ConfigNo
	ConfigYes     = procfs.ConfigYes
	ConfigModule  = procfs.ConfigModule
)

// CharMajor returns the major number /proc/devices lists for the character
// device name, the first (lowest) of several (procfs.LookupMajor).
func (p Platform) CharMajor(name string) (major uint32, ok bool) {
	return procfs.LookupMajor(p.CharDevices, name)
}

// PeermemLoaded reports whether a peer-memory client for NVIDIA GPUs is loaded:
// the nvidia_peermem or nv_peer_mem module (/proc/modules), or an nv_mem client
// (nv_mem, nv_mem_nc) registered with a MOFED or DOCA ib_core
// (/sys/kernel/mm/memory_peers). The one rule check and nccl both use.
func (p Platform) PeermemLoaded() bool {
	if p.Modules.Loaded("nvidia_peermem") || p.Modules.Loaded("nv_peer_mem") {
		return true
	}
	for name := range p.MemoryPeers {
		if strings.HasPrefix(name, "nv_mem") {
			return true
		}
	}
	return false
}
