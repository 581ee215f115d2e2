package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/check"
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
	in.MemlockConfig = memlockConfig(o.root, n)
	if in.Source != check.Live {
		return
	}
	var env map[string]string
	if ro.pid != 0 {
		env = ro.jobProcess(in, n)
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
	if b, err := readUnder(o.root, strings.TrimPrefix(path.Clean(file), "/")); err == nil {
		in.NCCLUserConf = check.ParseNCCLConf(file, b)
	} else if !errors.Is(err, fs.ErrNotExist) {
		n.Warnings = append(n.Warnings, fmt.Errorf("reading %s: %w", file, err))
	}
}

// jobProcess reads the --pid process and returns its environment, nil when
// unreadable.
func (ro *reportOptions) jobProcess(in *check.Inputs, n *node.Node) map[string]string {
	fsys, err := procfs.NewFS(ro.global.root)
	if err != nil {
		n.Warnings = append(n.Warnings, fmt.Errorf("--pid: %w", err))
		return nil
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
	return pf.Env
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

// memlockConfig reads the configured locked-memory limits below root: pam_limits'
// /etc/security/limits.conf then limits.d/*.conf in name order (limits.conf(5)),
// systemd's /etc/systemd/system.conf then system.conf.d/*.conf
// (systemd-system.conf(5)); a later file that sets the limit replaces an earlier
// one. Nil when none of the files could be read.
func memlockConfig(root string, n *node.Node) *check.MemlockConfig {
	c := &check.MemlockConfig{}
	read := func(dir, first string, parse func(string, []byte) *check.ConfiguredLimit) *check.ConfiguredLimit {
		var out *check.ConfiguredLimit
		files := []string{path.Join(dir, first)}
		if r, err := os.OpenRoot(root); err == nil {
			more, _ := fs.Glob(r.FS(), strings.TrimPrefix(path.Join(dir, first+".d", "*.conf"), "/"))
			if first == "limits.conf" {
				more, _ = fs.Glob(r.FS(), strings.TrimPrefix(path.Join(dir, "limits.d", "*.conf"), "/"))
			}
			r.Close()
			slices.Sort(more)
			for _, m := range more {
				files = append(files, "/"+m)
			}
		}
		for _, f := range files {
			b, err := readUnder(root, strings.TrimPrefix(f, "/"))
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					n.Warnings = append(n.Warnings, fmt.Errorf("reading %s: %w", f, err))
				}
				continue
			}
			c.Read = append(c.Read, f)
			if l := parse(f, b); l != nil {
				out = l
			}
		}
		return out
	}
	c.Session = read("/etc/security", "limits.conf", check.ParseLimitsConf)
	c.Services = read("/etc/systemd", "system.conf", check.ParseSystemdMemlock)
	if len(c.Read) == 0 {
		return nil
	}
	return c
}
