package check

import (
	"sync"

	"github.com/p2pkit/p2pkit/gpu"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/p2pdma"
	"github.com/p2pkit/p2pkit/pathclass"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/provision"
)

// Source says where the analysed machine came from.
type Source string

// Sources of facts.
const (
	// Live is the running machine, read at /.
	Live Source = "live"
	// Root is a machine tree mounted under another directory (--root), such as a
	// container's /host; its files are live but the process is not on it.
	Root Source = "root"
	// Snapshot is a capture read back (--snapshot) or a fixture tree.
	Snapshot Source = "snapshot"
)

// Inputs are the facts gathered at the edge besides the node itself. The zero
// value means "nothing known": a snapshot without NVML, probe or process limits.
type Inputs struct {
	Source Source
	// NCCLEnv holds the NCCL_* variables of the judged process's environment
	// (Process says whose); nil when unknown (a snapshot or another root, or an
	// environment that could not be read).
	NCCLEnv map[string]string
	// NCCLConf is /etc/nccl.conf of the analysed machine; nil when absent or unknown.
	NCCLConf *NCCLConf
	// NCCLUserConf is the file NCCL reads before /etc/nccl.conf: the one
	// NCCL_CONF_FILE names, else ~/.nccl.conf of the judged process's HOME; nil
	// when absent or unknown.
	NCCLUserConf *NCCLConf
	// Memlock is RLIMIT_MEMLOCK of the judged process; nil when unknown.
	Memlock *Rlimit
	// Process says whose limit and environment Memlock and NCCLEnv are; nil when
	// no process was looked at (a snapshot or another root).
	Process *Process
	// MemlockConfig is the locked-memory limit the machine's configuration gives
	// new sessions and services; nil when none of its files could be read.
	MemlockConfig *MemlockConfig
	// GDRDrvAccess is whether the running user may open /dev/gdrdrv read-write
	// (access(2)); nil when unknown: not the live machine, or no /dev/gdrdrv.
	GDRDrvAccess *Access
	// NoNVML says, as a sentence for the report, why Node.GPU is nil: NVML
	// missing, --quick, a snapshot.
	NoNVML string
	// Probe holds the --probe results; nil when the probe was not asked for.
	Probe *ProbeReport
	// AER says how aer_errors judges the cumulative AER counters.
	AER AERPolicy
	// Use is what the node's devices are for, as --virt-host or --bare-metal says
	// it; "" finds it from the ConnectX NICs' ATS capability (provision.DetectMode).
	Use provision.Mode
	// Expect is how many devices of each kind the node must have (--expect);
	// nil when not said. Require is what the node is for (--require; nil means
	// DefaultRequirements): inventory alone reads it, to tell a required
	// capability with nothing to judge.
	Expect  *Expectation
	Require []Capability
}

// NCCLConf is an NCCL configuration file: "NAME=value" lines.
type NCCLConf struct {
	Path string
	Vars map[string]string
}

// Access is what access(2) said for one user.
type Access struct {
	UID       int
	ReadWrite bool
}

// Process is the process the process-scoped checks (memlock_limit, nccl_env)
// judge: a job's, named with --pid, or p2pcheck's own.
type Process struct {
	PID int
	// Self is true for p2pcheck's own process (no --pid).
	Self bool
	// Comm is the process's name (/proc/PID/comm); empty when unknown.
	Comm string
	// EUID is the effective user id; -1 when unknown.
	EUID int
	// SudoUser is SUDO_USER of p2pcheck's own environment: it runs under sudo,
	// whose env_reset dropped the caller's NCCL_* variables.
	SudoUser string
	// CapIPCLock reports CAP_IPC_LOCK in the effective capability set
	// (/proc/PID/status CapEff), which lifts RLIMIT_MEMLOCK; nil when unknown.
	CapIPCLock *bool
	// EnvErr says why the environment could not be read (another user's
	// /proc/PID/environ needs root); empty when it was read.
	EnvErr string
}

// MemlockConfig is the configured locked-memory limit.
type MemlockConfig struct {
	// Session is the limit pam_limits gives login sessions (ssh, su, sudo -i)
	// from the wildcard entries of /etc/security/limits.conf and limits.d; nil
	// when they set none.
	Session *ConfiguredLimit
	// Services is systemd's DefaultLimitMEMLOCK for services without a
	// LimitMEMLOCK of their own (/etc/systemd/system.conf); nil when unset.
	Services *ConfiguredLimit
	// Read lists the files that were read.
	Read []string
}

// ConfiguredLimit is a limit and the file and line that set it.
type ConfiguredLimit struct {
	Rlimit
	Source string
}

// Rlimit is a resource limit; Unlimited for RLIM_INFINITY.
type Rlimit struct {
	Soft, Hard uint64
}

// Unlimited is RLIM_INFINITY.
const Unlimited = ^uint64(0)

// ProbeReport is what the data-integrity probe found.
type ProbeReport struct {
	// Skipped says why the probe could not run at all (no CUDA, fewer than two
	// GPUs); empty when it ran.
	Skipped string `json:"skipped,omitempty"`
	// Hung names the step that had not finished when the probe's time ran out
	// ("the copy gpu0->gpu1 did not finish within 2m0s"); empty when none hung.
	Hung string `json:"hung,omitempty"`
	// Size is the bytes copied per pair.
	Size  uint64      `json:"size_bytes"`
	Pairs []ProbePair `json:"pairs"`
}

// ProbePair is the probe's outcome for one ordered GPU pair.
type ProbePair struct {
	// Src and Dst are the GPUs' indices in PCI address order (nvidia-smi's).
	Src    int          `json:"src"`
	Dst    int          `json:"dst"`
	SrcBDF pcie.Address `json:"src_bdf"`
	DstBDF pcie.Address `json:"dst_bdf"`
	// PeerAccess is cuDeviceCanAccessPeer(dst, src).
	PeerAccess bool `json:"peer_access"`
	// Verified reports the destination held the pattern, read back by the owner.
	Verified bool `json:"verified"`
	// HostVerified reports the pattern read back through host staging matched.
	HostVerified bool `json:"host_verified"`
	// Mismatch is the first differing byte offset, -1 when none.
	Mismatch int64 `json:"mismatch"`
	// BytesPerSecond is the peer copy bandwidth; 0 when not measured.
	BytesPerSecond float64 `json:"bytes_per_second"`
	// Err is the CUDA error that stopped the pair, empty when none.
	Err string `json:"error,omitempty"`
}

// Facts is everything the checks look at. Build it with [NewFacts]. What the
// checks derive from the pairs of interest (each pair's kernel verdict, the
// devices on their paths) is computed once, on first use: change nothing in
// Node once a check has run.
type Facts struct {
	Inputs
	Node *node.Node
	// Privileged is true when configuration space past the 64-byte header was
	// readable (root); PrivilegeKnown is false when no function's config was read.
	Privileged, PrivilegeKnown bool

	calc *p2pdma.Calculator
	// gaps is true when some function's parent is not known: verdicts are then
	// checked for walks through it (p2pdma.Calculator.CheckComplete).
	gaps    bool
	devices []*pcie.Device // node.Interesting()
	roles   []role         // roleOf(devices[i])
	perRole [numRoles]int  // devices of each role

	// verdicts counts the verdicts computed, for the tests of what judging the
	// pairs costs.
	verdicts int

	classesNCCL sync.Once
	pathClasses *pathclass.Classes // see Facts.nearestNIC

	nvmlOnce   sync.Once
	nvmlByAddr map[pcie.Address]*gpu.GPU // see Facts.indexNVML
	nvlinkOK   map[[2]int]bool           // NVML GPU index pairs

	classOnce sync.Once
	classes   []*pairClass // see Facts.pairClasses
	scanOnce  sync.Once
	scanned   *pairScan // see Facts.scan
	pathOnce  sync.Once
	onPaths   *pathSets // see Facts.paths
}

// NewFacts combines a loaded node with the inputs gathered beside it. It reads
// nothing: whether the reader was privileged is decided from the data, since the
// kernel serves only the first 64 bytes of config to a reader without
// CAP_SYS_ADMIN (drivers/pci/pci-sysfs.c pci_read_config).
func NewFacts(n *node.Node, in Inputs) *Facts {
	f := &Facts{Inputs: in, Node: n}
	for _, d := range n.Topology.Devices {
		switch l := len(d.Record.Config); {
		case l > 64:
			f.Privileged, f.PrivilegeKnown = true, true
		case l > 0:
			f.PrivilegeKnown = true
		}
		f.gaps = f.gaps || d.PathIncomplete
	}
	f.calc = p2pdma.NewCalculator(n.Topology, n.P2P())
	f.devices = n.Interesting()
	f.roles = make([]role, len(f.devices))
	for i, d := range f.devices {
		f.roles[i] = roleOf(d)
		f.perRole[f.roles[i]]++
	}
	return f
}

// use returns what the node's devices are for and how that was decided: Inputs.Use,
// else what `p2pcheck fix` finds (provision.DetectMode); an error when the NICs do
// not tell.
func (f *Facts) use() (provision.Mode, string, error) {
	switch f.Use {
	case provision.ModeVirtHost:
		return f.Use, "--virt-host", nil
	case provision.ModeBareMetal:
		return f.Use, "--bare-metal", nil
	}
	return provision.DetectMode(f.Node.Topology.Devices, provision.FindShapes(f.Node.Topology))
}

// Arm64 reports whether the analysed machine is arm64 ([procfs.CPUInfo.Arm64]).
func (f *Facts) Arm64() bool {
	c := f.Node.Platform.CPU
	return c != nil && c.Arm64()
}

// Hypervisor reports whether the analysed kernel runs in a virtual machine.
func (f *Facts) Hypervisor() bool {
	return f.Node.Platform.CPU != nil && f.Node.Platform.CPU.Hypervisor()
}

// GPUs returns the GPUs of interest (physical functions), in address order.
func (f *Facts) GPUs() []*pcie.Device { return f.filter((*pcie.Device).IsGPU) }

// NICs returns the RDMA-capable network controllers, in address order: those
// with an RDMA device (/sys/class/infiniband) or of the InfiniBand class. A plain
// Ethernet NIC (virtio-net, a management port) is nobody's DMA peer.
func (f *Facts) NICs() []*pcie.Device { return f.filter(isRDMANIC) }

func isRDMANIC(d *pcie.Device) bool {
	return d.IsNIC() && (len(d.RDMADevs) > 0 || d.ClassCode()>>8 == pcie.ClassInfiniBand)
}

// NVIDIAGPUs returns the GPUs made by NVIDIA.
func (f *Facts) NVIDIAGPUs() []*pcie.Device {
	return f.filter(func(d *pcie.Device) bool { return d.IsGPU() && d.Vendor == pcie.VendorNVIDIA })
}

func (f *Facts) filter(keep func(*pcie.Device) bool) []*pcie.Device {
	var out []*pcie.Device
	for _, d := range f.devices {
		if keep(d) {
			out = append(out, d)
		}
	}
	return out
}

// verdict is the kernel's P2PDMA verdict with a as provider and b as client, as
// p2pdma.Calculator.Brief gives it: the checks judge its kinds of unknowns, never
// the whole list.
func (f *Facts) verdict(p pair) p2pdma.Verdict {
	f.verdicts++
	v := f.calc.Brief(p.a, p.b)
	if f.gaps {
		// A verdict whose walk crosses a function of unknown parent is unknown, as
		// pair and pairs say it.
		v = f.calc.CheckComplete(v, p.a, p.b)
	}
	return v
}
