package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/procfs"
)

// The facts of the process-scoped checks (memlock_limit, nccl_env): the process
// named with --pid or p2pcheck's own, the configured locked-memory limits and the
// NCCL configuration file NCCL reads before /etc/nccl.conf.

// validatePID checks --pid: the live machine only, and the process must exist.
func (ro *reportOptions) validatePID() error {
	switch {
	case ro.pid == 0:
		return nil
	case ro.pid < 0:
		return usageError("--pid must be a process id, not %d", ro.pid)
	case ro.source() != check.Live:
		return usageError("--pid judges a process of the live machine: not with --snapshot or --root")
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(ro.pid)); err != nil {
		return usageError("--pid %d: no such process", ro.pid)
	}
	return nil
}

// processInputs fills the process-scoped facts of in.
func (ro *reportOptions) processInputs(in *check.Inputs, n *node.Node) {
	o := ro.global
	if in.Source == check.Snapshot {
		return
	}
	if r, err := o.openRun(); err == nil {
		in.MemlockConfig = memlockConfig(r, n)
		r.Close()
	} else {
		n.Warnings = append(n.Warnings, err)
	}
	if in.Source != check.Live {
		return
	}
	var env map[string]string
	var cred *hostfs.Cred // the job's, for the files its environment names
	if ro.pid != 0 {
		env, cred = ro.jobProcess(in, n)
	} else {
		env = selfProcess(in, n)
	}
	if env == nil {
		return
	}
	in.NCCLEnv = map[string]string{}
	for k, v := range env {
		if strings.HasPrefix(k, "NCCL_") {
			in.NCCLEnv[k] = v
		}
	}
	// NCCL reads the file NCCL_CONF_FILE names, else ~/.nccl.conf (initEnv in
	// src/misc/param.cc).
	file := env["NCCL_CONF_FILE"]
	if file == "" && env["HOME"] != "" {
		file = path.Join(env["HOME"], ".nccl.conf")
	}
	if file == "" || !path.IsAbs(file) {
		return
	}
	if b, err := ro.readJobFile(file, cred); err == nil {
		in.NCCLUserConf = check.ParseNCCLConf(file, b)
	} else if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, hostfs.ErrNotPermitted) {
		n.Warnings = append(n.Warnings, fmt.Errorf("reading %s: %w", file, err))
	}
}

// readJobFile reads the NCCL configuration file the judged process's environment
// names: p2pcheck's own, a file its user named; a --pid job's (cred set), only if
// the job itself could read it, since p2pcheck usually runs as root and must not
// show a job's user what only root may read.
func (ro *reportOptions) readJobFile(file string, cred *hostfs.Cred) ([]byte, error) {
	o := ro.global
	if ro.pid == 0 {
		return hostfs.ReadNamed(o.reads, file, kindNCCLConf)
	}
	if cred == nil {
		return nil, fmt.Errorf("not read: the credentials of process %d are unknown, so what it may read is too: %w", ro.pid, hostfs.ErrNotPermitted)
	}
	b, err := hostfs.ReadAs(o.reads, path.Clean(file), kindNCCLConf, *cred)
	if errors.Is(err, hostfs.ErrNotPermitted) {
		return nil, fmt.Errorf("not read: process %d could not read it itself, and p2pcheck shows a job only what it may read: %w", ro.pid, err)
	}
	return b, err
}

// jobProcess reads the --pid process and returns its environment, nil when
// unreadable, and its credentials, nil when unknown.
func (ro *reportOptions) jobProcess(in *check.Inputs, n *node.Node) (map[string]string, *hostfs.Cred) {
	fsys, err := procfs.NewFS(ro.global.root)
	if err != nil {
		n.Warnings = append(n.Warnings, fmt.Errorf("--pid: %w", err))
		return nil, nil
	}
	defer fsys.Close()
	pf, err := fsys.Process(ro.pid)
	if err != nil {
		n.Warnings = append(n.Warnings, fmt.Errorf("--pid %d: %w", ro.pid, err))
	}
	pr := &check.Process{PID: ro.pid, Comm: pf.Comm, EUID: pf.EUID}
	if pf.CapEffKnown {
		lock := pf.CapEff&(1<<procfs.CapIPCLock) != 0
		pr.CapIPCLock = &lock
	}
	if pf.MemlockKnown {
		in.Memlock = &check.Rlimit{Soft: unlimited(pf.MemlockSoft), Hard: unlimited(pf.MemlockHard)}
	}
	if pf.EnvErr != nil {
		pr.EnvErr = pf.EnvErr.Error()
		if errors.Is(pf.EnvErr, fs.ErrPermission) {
			pr.EnvErr = "permission denied: another user's /proc/PID/environ needs root"
		}
	}
	in.Process = pr
	cred, ok := pf.Cred()
	if !ok {
		return pf.Env, nil
	}
	return pf.Env, &cred
}

// selfProcess describes p2pcheck's own process and returns its environment.
func selfProcess(in *check.Inputs, n *node.Node) map[string]string {
	pr := &check.Process{PID: os.Getpid(), Self: true, EUID: os.Geteuid()}
	if pr.EUID == 0 {
		pr.SudoUser = os.Getenv("SUDO_USER")
	}
	if fsys, err := procfs.NewFS("/"); err == nil {
		if pf, _ := fsys.Process(pr.PID); pf.CapEffKnown {
			lock := pf.CapEff&(1<<procfs.CapIPCLock) != 0
			pr.CapIPCLock = &lock
		}
		fsys.Close()
	}
	in.Process = pr
	in.Memlock = memlock()
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

func unlimited(v uint64) uint64 {
	if v == ^uint64(0) {
		return check.Unlimited
	}
	return v
}

// memlockConfig reads the configured locked-memory limits below r: pam_limits'
// /etc/security/limits.conf then limits.d/*.conf in name order (limits.conf(5)),
// systemd's /etc/systemd/system.conf then system.conf.d/*.conf
// (systemd-system.conf(5)); a later file that sets the limit replaces an earlier
// one. Nil when none of the files could be read.
func memlockConfig(r hostfs.Root, n *node.Node) *check.MemlockConfig {
	c := &check.MemlockConfig{}
	read := func(first, dropIns string, k hostfs.Kind, parse func(string, []byte) *check.ConfiguredLimit) *check.ConfiguredLimit {
		var out *check.ConfiguredLimit
		files := []string{first}
		more, err := r.Glob(dropIns, maxDropIns)
		if err != nil {
			n.Warnings = append(n.Warnings, err)
		}
		for _, f := range append(files, more...) {
			b, err := r.ReadKind(f, k)
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					n.Warnings = append(n.Warnings, err)
				}
				continue
			}
			c.Read = append(c.Read, "/"+f)
			if l := parse("/"+f, b); l != nil {
				out = l
			}
		}
		return out
	}
	c.Session = read("etc/security/limits.conf", "etc/security/limits.d/*.conf", kindLimits, check.ParseLimitsConf)
	c.Services = read("etc/systemd/system.conf", "etc/systemd/system.conf.d/*.conf", kindSystemd, check.ParseSystemdMemlock)
	if len(c.Read) == 0 {
		return nil
	}
	return c
}
