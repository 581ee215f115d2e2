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
	p := ProcessFacts{PID: pid, EUID: -1}
	if pid <= 0 {
		return p, fmt.Errorf("procfs: bad process id %d", pid)
	}
	dir := "proc/" + strconv.Itoa(pid) + "/"
	status, err := fsys.r.ReadFile(dir+"status", procLimit)
	if err != nil {
		return p, err
	}
	var errs []error
	p.EUID, p.CapEff, p.CapEffKnown = parseProcStatus(status)
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

// parseProcStatus reads the effective uid and CapEff of /proc/PID/status
// (proc_pid_status in fs/proc/array.c: "Uid:\treal\teffective\tsaved\tfs",
// "CapEff:\t%016llx"); the uid is -1 when absent.
func parseProcStatus(b []byte) (euid int, capEff uint64, capKnown bool) {
	euid = -1
	for line := range strings.Lines(string(b)) {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(val)
		switch key {
		case "Uid":
			if len(f) >= 2 {
				if v, err := strconv.Atoi(f[1]); err == nil && v >= 0 {
					euid = v
				}
			}
		case "CapEff":
			if len(f) == 1 {
				if v, err := strconv.ParseUint(f[0], 16, 64); err == nil {
					capEff, capKnown = v, true
				}
			}
		}
	}
	return euid, capEff, capKnown
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
