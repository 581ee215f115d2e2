package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/hostfs"
)

// This file reads one process's /proc/PID files (fs/proc/array.c proc_pid_status,
// fs/proc/base.c proc_pid_limits and environ), for the checks that judge a job's
// process (its locked-memory limit, its NCCL environment) rather than the node.

// ProcessFacts is what p2pkit reads about one process.
type ProcessFacts struct {
	PID  int
	Comm string // /proc/PID/comm; empty when unreadable
	// EUID is the effective user id (second field of "Uid:" in /proc/PID/status);
	// -1 when unknown.
	EUID int
	// CapEff is the effective capability set ("CapEff:" in /proc/PID/status);
	// CapEffKnown is false when it could not be read.
	CapEff      uint64
	CapEffKnown bool
	// FSUID and FSGID are the file-system user and group ids (the fourth fields of
	// "Uid:" and "Gid:"), the ids the kernel checks file access against; -1 when
	// unknown. Groups are the supplementary groups ("Groups:").
	FSUID, FSGID int
	Groups       []uint32
	// MemlockSoft and MemlockHard are "Max locked memory" of /proc/PID/limits in
	// bytes, math.MaxUint64 for unlimited; MemlockKnown is false when unreadable.
	MemlockSoft, MemlockHard uint64
	MemlockKnown             bool
	// Env is /proc/PID/environ; nil when unreadable (another user's needs root,
	// proc_environ_open in fs/proc/base.c), EnvErr then says why.
	Env    map[string]string
	EnvErr error
}

// CapIPCLock is the bit of CAP_IPC_LOCK (include/uapi/linux/capability.h), which
// lifts RLIMIT_MEMLOCK for memory locking and RDMA registration.
const CapIPCLock = 14

// Process reads what it can of /proc/PID; the error joins the failures of files
// that exist but could not be read or parsed. A process that does not exist is an
// error wrapping fs.ErrNotExist.
func (fsys FS) Process(pid int) (ProcessFacts, error) {
	p := ProcessFacts{PID: pid, EUID: -1, FSUID: -1, FSGID: -1}
	if pid <= 0 {
		return p, fmt.Errorf("procfs: bad process id %d", pid)
	}
	dir := "proc/" + strconv.Itoa(pid) + "/"
	status, err := fsys.r.ReadFile(dir+"status", procLimit)
	if err != nil {
		return p, err
	}
	var errs []error
	st := parseProcStatus(status)
	p.EUID, p.FSUID, p.FSGID, p.Groups = st.euid, st.fsuid, st.fsgid, st.groups
	p.CapEff, p.CapEffKnown = st.capEff, st.capKnown
	if b, err := fsys.r.ReadFile(dir+"comm", 4096); err == nil {
		p.Comm = strings.TrimSpace(string(b))
	}
	if b, err := fsys.r.ReadFile(dir+"limits", procLimit); err == nil {
		if p.MemlockSoft, p.MemlockHard, err = parseMemlockLimit(b); err == nil {
			p.MemlockKnown = true
		} else {
			errs = append(errs, hostfs.PathError("parse", dir+"limits", err))
		}
	} else {
		errs = append(errs, err)
	}
	if b, err := fsys.r.ReadFile(dir+"environ", procLimit); err == nil {
		p.Env = parseEnviron(b)
	} else {
		p.EnvErr = err
	}
	return p, errors.Join(errs...)
}

// CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (include/uapi/linux/capability.h):
// either lets a process read any file and search any directory.
const (
	capDACOverride   = 1
	capDACReadSearch = 2
)

// Cred returns the credentials the kernel checks the process's file access with
// (hostfs.Cred); ok is false when /proc/PID/status did not give them.
func (p ProcessFacts) Cred() (c hostfs.Cred, ok bool) {
	if p.FSUID < 0 || p.FSGID < 0 || !p.CapEffKnown {
		return hostfs.Cred{}, false
	}
	bypass := p.CapEff&(1<<capDACOverride|1<<capDACReadSearch) != 0
	return hostfs.Cred{UID: uint32(p.FSUID), GID: uint32(p.FSGID), Groups: p.Groups, Bypass: bypass}, true
}

// procStatus is what parseProcStatus reads; ids are -1 when absent.
type procStatus struct {
	euid, fsuid, fsgid int
	groups             []uint32
	capEff             uint64
	capKnown           bool
}

// parseProcStatus reads the uids, gids, groups and CapEff of /proc/PID/status
// (proc_pid_status and task_state in fs/proc/array.c: "Uid:\treal\teffective\tsaved\tfs",
// "Gid:" alike, "Groups:" a list, "CapEff:\t%016llx").
func parseProcStatus(b []byte) procStatus {
	st := procStatus{euid: -1, fsuid: -1, fsgid: -1}
	for line := range strings.Lines(string(b)) {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(val)
		switch key {
		case "Uid":
			st.euid, st.fsuid = idField(f, 1), idField(f, 3)
		case "Gid":
			st.fsgid = idField(f, 3)
		case "Groups":
			st.groups = nil
			for i := range f {
				if g := idField(f, i); g >= 0 {
					st.groups = append(st.groups, uint32(g))
				}
			}
		case "CapEff":
			if len(f) == 1 {
				if v, err := strconv.ParseUint(f[0], 16, 64); err == nil {
					st.capEff, st.capKnown = v, true
				}
			}
		}
	}
	return st
}

// idField parses f[i] as a user or group id, -1 when absent or bad.
func idField(f []string, i int) int {
	if i >= len(f) {
		return -1
	}
	v, err := strconv.ParseUint(f[i], 10, 32)
	if err != nil {
		return -1
	}
	return int(v)
}

// parseMemlockLimit reads the "Max locked memory" row of /proc/PID/limits
// (proc_pid_limits in fs/proc/base.c: a 25-character name, then soft and hard
// limits, "unlimited" or a number, and the unit "bytes").
func parseMemlockLimit(b []byte) (soft, hard uint64, err error) {
	const name = "Max locked memory"
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, name)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			return 0, 0, fmt.Errorf("%s: want soft and hard limits, got %q", name, strings.TrimSpace(rest))
		}
		if soft, err = parseLimit(f[0]); err == nil {
			hard, err = parseLimit(f[1])
		}
		return soft, hard, err
	}
	return 0, 0, errors.New("no " + name + " row")
}

func parseLimit(s string) (uint64, error) {
	if s == "unlimited" {
		return math.MaxUint64, nil
	}
	return strconv.ParseUint(s, 10, 64)
}

// parseEnviron splits /proc/PID/environ, NUL-terminated NAME=value strings; an
// entry without '=' is kept with an empty value, the first of a repeated name wins
// as getenv(3) finds it.
func parseEnviron(b []byte) map[string]string {
	env := map[string]string{}
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if len(kv) == 0 {
			continue
		}
		k, v, _ := strings.Cut(string(kv), "=")
		if _, seen := env[k]; !seen && k != "" {
			env[k] = v
		}
	}
	return env
}
