// Package gdrready decides whether a node is ready for GDRCopy: one pure function,
// [Judge], from plain facts (gdrdrv loaded, its character major, /dev/gdrdrv, its
// params, the NVIDIA driver) to a [Verdict] with the problems in the order a fix has
// to follow and the fix texts for each. p2pcheck's gdrdrv check, gdrbench's diagnosis
// and the error texts of package gdrcopy all use it, so the three say the same thing.
//
// The package reads nothing: callers gather the facts (sysfs.FS, NVML, access(2)).
//
// How gdrdrv comes up, which the order of the problems follows: the module loads and
// registers a dynamic character major (register_chrdev in gdrdrv_init,
// src/gdrdrv/gdrdrv.c of NVIDIA/gdrcopy, visible in /proc/devices); udev makes no node
// because the module registers no device class, so a script makes /dev/gdrdrv with
// that major and minor 0 (insmod.sh and the Debian gdrdrv init script with mode 0666,
// the SUSE modprobe rule with mode 0660 and group video).
package gdrready

import (
	"fmt"
	"io/fs"
	"slices"
	"strings"
)

// Facts are what readiness is judged on. The zero value knows nothing.
type Facts struct {
	// Module reports gdrdrv in /proc/modules; nil when /proc/modules is unreadable.
	Module *bool
	// DevicesRead reports that /proc/devices was read; Major is then the major
	// gdrdrv registered there, nil when it registered none.
	DevicesRead bool
	Major       *uint32
	// Node describes /dev/gdrdrv; nil when it does not exist (or NodeErr says why
	// it could not be inspected).
	Node    *Node
	NodeErr string
	// Params is /proc/driver/gdrdrv/params (GDRCopy 2.5+, gdrdrv_proc_params_read);
	// nil when absent.
	Params map[string]string
	// Driver is the loaded NVIDIA kernel driver; nil when not loaded or unknown.
	Driver *Driver
	// Access is what access(2) said about /dev/gdrdrv for the running user; nil when
	// not asked (not the live machine).
	Access *Access
	// Arm64 reports an arm64 host, where the coherent platforms (Grace Hopper,
	// Grace Blackwell) are.
	Arm64 bool
	// IntelTDXGuest reports an Intel TDX guest (the "tdx_guest" CPU flag): a kernel
	// with CONFIG_ARCH_HAS_CC_PLATFORM running with confidential computing on.
	IntelTDXGuest bool
	// OpenErr is the error opening /dev/gdrdrv gave, when it was tried.
	OpenErr string
}

// Node is a device node as stat(2) describes it.
type Node struct {
	Mode         fs.FileMode
	Major, Minor uint32
	// NumberKnown is false when the device numbers could not be read.
	NumberKnown bool
}

// Driver is the loaded NVIDIA kernel driver, from /proc/driver/nvidia/version.
type Driver struct {
	Version string
	Major   int
	// Open reports the open GPU kernel modules (nvidia-open), not the proprietary ones.
	Open bool
}

// Access is what access(2) said for one user.
type Access struct {
	UID       int
	ReadWrite bool
}

// Severity orders problems by what they mean for GDRCopy through gdrdrv.
type Severity string

// Severities of a problem.
const (
	// Blocking: GDRCopy cannot use gdrdrv until it is fixed.
	Blocking Severity = "blocking"
	// Degraded: gdrdrv works, for some users or more slowly.
	Degraded Severity = "degraded"
	// Info: worth knowing, nothing to fix here.
	Info Severity = "info"
)

// Problem is one finding with its fixes, the preferred first.
type Problem struct {
	Severity Severity
	What     string
	Fix      []string
}

// Verdict is the outcome of [Judge].
type Verdict struct {
	// Known is false when nothing could be read: no /proc/modules, no
	// /proc/devices and no /dev/gdrdrv.
	Known bool
	// Ready is true when no problem is Blocking.
	Ready bool
	// Version and Flavour are gdrdrv's own, from its params; empty when unknown.
	Version, Flavour string
	// Problems in the order a fix has to follow, most fundamental first.
	Problems []Problem
}

// First returns the problem to fix first: the first blocking one, else the first
// degraded one; nil when there is none.
func (v Verdict) First() *Problem {
	for _, s := range []Severity{Blocking, Degraded} {
		for i := range v.Problems {
			if v.Problems[i].Severity == s {
				return &v.Problems[i]
			}
		}
	}
	return nil
}

// Params keys of /proc/driver/gdrdrv/params (gdrdrv_proc_params_read in
// src/gdrdrv/gdrdrv.c, GDRCopy 2.5+).
const (
	ParamVersion = "Version"
	ParamFlavour = "Built for NVIDIA driver flavor"
)

// Fix texts. The service names are those of GDRCopy's packaging (NVIDIA/gdrcopy
// packages/): the Debian/Ubuntu gdrdrv-dkms package installs an init script named
// gdrdrv (packages/dkms/debian/rules, dh_installinit --name gdrdrv), the RHEL RPM a
// systemd unit named gdrcopy (packages/gdrcopy.spec, packages/rhel/gdrcopy.service),
// and the SUSE RPM no service but /etc/modprobe.d/50-gdrdrv.conf, whose install rule
// makes the node on modprobe (mode 0660, group video).
const (
	// FixLoad loads gdrdrv the way each packaging does, all of which make the node.
	FixLoad = "load gdrdrv with what installed it, which also creates /dev/gdrdrv: " +
		"sudo systemctl start gdrdrv (Debian/Ubuntu gdrdrv-dkms), " +
		"sudo systemctl start gdrcopy (RHEL RPM), " +
		"sudo modprobe gdrdrv (SUSE RPM: its modprobe rule makes the node), " +
		"or sudo ./insmod.sh in a GDRCopy source tree"
	// FixOperator is the GPU Operator's switch for its GDRCopy driver container.
	FixOperator = "with the NVIDIA GPU Operator: set the Helm value gdrcopy.enabled=true"
	// FixContainer passes the host's node into a container.
	FixContainer = "in a container: pass the host node in (docker run --device=/dev/gdrdrv; " +
		"GPU Operator: Helm value gdrcopy.enabled=true)"
	// FixDMABuf is GDRCopy 2.6's way without gdrdrv (NVIDIA/gdrcopy README "DMA-BUF
	// mmap backend", src/gdrapi.c gdr_open): gdr_open falls back to it by itself.
	FixDMABuf = "or do without gdrdrv: GDRCopy 2.6+ falls back to its DMA-BUF mmap backend by itself when gdrdrv " +
		"is absent (GDRCOPY_USE_DMABUF_MMAP=1 forces it); it needs CUDA driver 13.3+ and a GPU that reports " +
		"CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED (NVIDIA documents DMA-BUF with the open NVIDIA kernel modules)"
	// FixNoDMABuf says why the DMA-BUF backend is out of reach with the proprietary modules.
	FixNoDMABuf = "the DMA-BUF backend of GDRCopy 2.6 is no way round here: the proprietary NVIDIA kernel modules " +
		"do not export DMA-BUF (it takes the open modules and CUDA driver 13.3+)"
	// FixNoMajor is for a module that registered no character device.
	FixNoMajor = "check dmesg for gdrdrv_init errors, then unload and load gdrdrv again"
	// FixPermission opens the node to every user as insmod.sh does.
	FixPermission = "sudo chmod 666 /dev/gdrdrv (insmod.sh and the Debian gdrdrv service make it 0666; the SUSE " +
		"modprobe rule makes it 0660 group video: add the users to group video instead)"
	// FixStale is for a node whose major no loaded driver answers for.
	FixStale = "no loaded driver answers for the major of /dev/gdrdrv: load gdrdrv (" + FixLoadShort +
		") and make the node again with the major from grep gdrdrv /proc/devices"
	// FixLoadShort names the ways to load gdrdrv in a few words.
	FixLoadShort = "systemctl start gdrdrv on Debian/Ubuntu, gdrcopy on RHEL, modprobe gdrdrv on SUSE, or insmod.sh"
	// FixNotGDRDrv is for a node that does not answer GET_VERSION.
	FixNotGDRDrv = "the node does not answer the GET_VERSION of gdrdrv: it may be stale with its major reused by another " +
		"driver (compare ls -l /dev/gdrdrv with grep gdrdrv /proc/devices), or the module predates GDRCopy 2.0"
)

// MknodFix returns the command that makes the node with major, or with a
// placeholder when the major is unknown.
func MknodFix(major *uint32) string {
	if major == nil {
		return "sudo mknod -m 666 /dev/gdrdrv c <major from grep gdrdrv /proc/devices> 0"
	}
	return fmt.Sprintf("sudo mknod -m 666 /dev/gdrdrv c %d 0", *major)
}

// Judge decides gdrdrv readiness from f. The rules, in order:
//
//   - the module is loaded (/proc/modules) and registered its major (/proc/devices);
//   - /dev/gdrdrv exists, is a character device, has that major (a node left from an
//     earlier load points at whatever driver owns the number now) and minor 0, the
//     only minor gdrdrv serves (gdrdrv_open in src/gdrdrv/gdrdrv.c);
//   - the running user can open it read-write, or, when that was not asked, every
//     user can (mode 0666);
//   - gdrdrv's build flavour against the loaded driver, after the NVIDIA/gdrcopy
//     README ("There are two major flavors of NVIDIA driver"): a gdrdrv built for
//     the open driver cannot load with the proprietary one; one built for the
//     proprietary driver loads and works with either, slower on coherent platforms
//     (Grace Hopper) and not at all on Intel CPUs with confidential computing on. A
//     mismatch is therefore information, except in those two cases.
func Judge(f Facts) Verdict {
	v := Verdict{Known: f.Module != nil || f.DevicesRead || f.Node != nil || f.Params != nil}
	if !v.Known {
		return v
	}
	add := func(s Severity, what string, fix ...string) {
		v.Problems = append(v.Problems, Problem{Severity: s, What: what, Fix: fix})
	}
	// /proc/devices lists gdrdrv's major only while the module is loaded.
	loaded := f.Module != nil && *f.Module || f.Module == nil && f.Major != nil
	if f.Params != nil {
		v.Version, v.Flavour = f.Params[ParamVersion], f.Params[ParamFlavour]
	}
	notLoaded := (f.Module != nil && !loaded) || (f.Module == nil && f.DevicesRead && f.Major == nil)
	moduleRule(f, notLoaded, add)
	nodeRule(f, notLoaded, add)
	if loaded && f.Params == nil {
		add(Info, "no /proc/driver/gdrdrv/params: gdrdrv older than GDRCopy 2.5, version and flavour unknown")
	}
	flavourRule(f, v.Flavour, add)
	if len(v.Problems) == 0 && f.OpenErr != "" {
		add(Blocking, "opening /dev/gdrdrv failed: "+f.OpenErr,
			"check that /dev/gdrdrv belongs to gdrdrv and that gdrdrv was built for the loaded NVIDIA driver (dmesg)")
	}
	v.Ready = v.Known && !slices.ContainsFunc(v.Problems, func(p Problem) bool { return p.Severity == Blocking })
	return v
}

// moduleRule: the module is loaded (/proc/modules) and registered its major
// (/proc/devices).
func moduleRule(f Facts, notLoaded bool, add func(Severity, string, ...string)) {
	switch {
	case notLoaded:
		what := "the gdrdrv kernel module is not loaded (not in /proc/modules)"
		if f.Module == nil {
			what = "the gdrdrv kernel module is not loaded (no gdrdrv in /proc/devices)"
		}
		add(Blocking, what, loadFixes(f)...)
		if f.Node != nil {
			add(Blocking, "a stale /dev/gdrdrv exists: no loaded driver answers for its major", FixLoad)
		}
	case f.Module != nil && *f.Module && f.DevicesRead && f.Major == nil:
		add(Blocking, "gdrdrv is loaded but registered no character device in /proc/devices", FixNoMajor)
	}
}

// nodeRule: /dev/gdrdrv exists, is a character device with gdrdrv's major and
// minor 0, and the running user (or, when that was not asked, every user) can
// open it read-write.
func nodeRule(f Facts, notLoaded bool, add func(Severity, string, ...string)) {
	recreate := "sudo rm /dev/gdrdrv && " + MknodFix(f.Major)
	n := f.Node
	if n == nil {
		missingNodeRule(f, notLoaded, add)
		return
	}
	switch {
	case n.Mode&fs.ModeCharDevice == 0:
		add(Blocking, fmt.Sprintf("/dev/gdrdrv is not a character device (mode %s)", n.Mode), recreate)
	case n.NumberKnown && f.Major != nil && n.Major != *f.Major:
		add(Blocking, fmt.Sprintf("/dev/gdrdrv has major %d but gdrdrv registered major %d (a stale node)", n.Major, *f.Major), recreate)
	case n.NumberKnown && n.Minor != 0:
		add(Blocking, fmt.Sprintf("/dev/gdrdrv has minor %d; gdrdrv serves minor 0 only", n.Minor), recreate)
	case f.Access != nil && !f.Access.ReadWrite:
		add(Degraded, fmt.Sprintf("/dev/gdrdrv mode %04o: the running user (uid %d) cannot open it read-write", n.Mode.Perm(), f.Access.UID), FixPermission)
	case n.Mode.Perm()&0o006 != 0o006:
		add(Degraded, fmt.Sprintf("/dev/gdrdrv mode %04o: only its owner and group can use GDRCopy", n.Mode.Perm()), FixPermission)
	}
}

// missingNodeRule words a /dev/gdrdrv that could not be inspected or does not
// exist.
func missingNodeRule(f Facts, notLoaded bool, add func(Severity, string, ...string)) {
	switch {
	case f.NodeErr != "":
		add(Blocking, "cannot inspect /dev/gdrdrv: "+f.NodeErr, "check the permissions of /dev")
	case !notLoaded:
		what := "/dev/gdrdrv does not exist"
		if f.Major != nil {
			what = fmt.Sprintf("gdrdrv is loaded (major %d) but /dev/gdrdrv does not exist", *f.Major)
		}
		add(Blocking, what, MknodFix(f.Major), FixContainer)
	default:
		add(Blocking, "/dev/gdrdrv does not exist", FixLoad)
	}
}

// loadFixes are the ways to a working GDRCopy when gdrdrv is not loaded.
func loadFixes(f Facts) []string {
	fixes := []string{FixLoad, FixOperator}
	switch d := f.Driver; {
	case d != nil && !d.Open:
		fixes = append(fixes, FixNoDMABuf)
	default:
		fixes = append(fixes, FixDMABuf)
	}
	return fixes
}

// flavourRule compares gdrdrv's build flavour with the loaded driver (NVIDIA/gdrcopy
// README, "two major flavors"; the params spell them "opensource" and "proprietary").
func flavourRule(f Facts, flavour string, add func(Severity, string, ...string)) {
	d := f.Driver
	if d == nil || flavour == "" {
		return
	}
	const rebuild = "rebuild gdrdrv against the source of the loaded driver (the gdrdrv-dkms and gdrcopy-kmod packages " +
		"build against /usr/src/nvidia-<version>) and load it again"
	switch open := strings.EqualFold(flavour, "opensource"); {
	case open && !d.Open:
		add(Degraded, "gdrdrv was built for the open NVIDIA driver but the proprietary one is loaded: "+
			"the GDRCopy README says such a gdrdrv cannot load with it (was the driver changed after gdrdrv loaded?)", rebuild)
	case !open && d.Open && f.IntelTDXGuest:
		add(Blocking, "gdrdrv was built for the proprietary NVIDIA driver and this is an Intel TDX guest: "+
			"the GDRCopy README says that gdrdrv does not work on Intel CPUs with confidential computing on", rebuild)
	case !open && d.Open && f.Arm64:
		add(Degraded, "gdrdrv was built for the proprietary NVIDIA driver and runs with the open one: "+
			"it works, but the GDRCopy README says it is slower on coherent platforms such as Grace Hopper", rebuild)
	case !open && d.Open:
		add(Info, "gdrdrv was built for the proprietary NVIDIA driver and runs with the open one: "+
			"the GDRCopy README says it works with either (slower only on coherent platforms, "+
			"broken only on Intel CPUs with confidential computing on)")
	}
}
