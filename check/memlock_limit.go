package check

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/p2pkit/p2pkit/internal/bytesize"
)

// Checks about a job's process: its locked-memory limit and its NCCL settings.
// They judge the process named with --pid, else the configured limits and files,
// and say when all they saw was p2pcheck's own process, whose limit and
// environment may not be a job's: under sudo root's CAP_IPC_LOCK lifts the limit
// and sudo's env_reset drops the caller's NCCL_* variables.

// memlockMin is the locked-memory limit below which memlock_limit fails: RDMA
// registration pins every buffer for its lifetime (ib_umem_get in
// drivers/infiniband/core/umem.c charges it to RLIMIT_MEMLOCK unless the process
// has CAP_IPC_LOCK), and NCCL registers buffers of hundreds of MiB per GPU and
// peer. NVIDIA's and the RDMA stacks' guides set "unlimited"; 16 GiB is p2pkit's
// floor for "enough for one job".
const memlockMin = 16 << 30

// checkMemlock judges RLIMIT_MEMLOCK where jobs get it: the process named with
// --pid (/proc/PID/limits), else p2pcheck's own process when it is an ordinary
// user's, else, for root (whose CAP_IPC_LOCK makes its own limit moot), the
// configured limits: pam_limits' wildcard entries in /etc/security/limits.conf
// and limits.d for login sessions, systemd's DefaultLimitMEMLOCK for services.
// It only matters with an RDMA NIC. A low limit makes ibv_reg_mr fail
// ("Couldn't allocate MR") and blocks gdr.
func checkMemlock(f *Facts) Result {
	r := Result{Refs: []string{docRef("memlock_limit"), "getrlimit(2)", "limits.conf(5)", "systemd-system.conf(5) DefaultLimitMEMLOCK", "linux drivers/infiniband/core/umem.c ib_umem_get"}}
	if len(f.NICs()) == 0 {
		r.Status, r.Summary = Skip, "no RDMA NIC: the limit only bounds RDMA memory registration"
		return r
	}
	r.Expected = "unlimited, or at least 16 GiB"
	pr := f.Process
	rootSelf := pr != nil && pr.Self && (pr.EUID == 0 || pr.CapIPCLock != nil && *pr.CapIPCLock)
	switch {
	case pr != nil && !pr.Self && pr.CapIPCLock != nil && *pr.CapIPCLock:
		r.Status = Pass
		r.Observed = "CAP_IPC_LOCK"
		r.Summary = fmt.Sprintf("process %s has CAP_IPC_LOCK: RLIMIT_MEMLOCK does not bound its registrations", procName(pr))
		r.Evidence = []Evidence{{Source: fmt.Sprintf("/proc/%d/status CapEff", pr.PID), Value: "CAP_IPC_LOCK"}}
		return r
	case f.Memlock != nil && !rootSelf:
		return judgeLimit(r, *f.Memlock, limitSource(pr), processNote(pr))
	case f.MemlockConfig != nil:
		return judgeConfigured(r, f.MemlockConfig, rootNote(pr))
	case rootSelf:
		r.Status = Unknown
		r.Blocks = []Capability{CapGDR}
		r.Summary = "p2pcheck runs as root, whose CAP_IPC_LOCK makes its own limit moot, and the configured limits could not be read: jobs' limits are unknown"
		r.Remediation = []string{"run p2pcheck --pid <PID of a job process> to judge a job's limit"}
		return r
	}
	r.Status = Skip
	r.Summary = "RLIMIT_MEMLOCK is a property of a running process and the configured limits were not read: unknown for a snapshot"
	return r
}

// procName names a process for messages: "1234 (python)".
func procName(p *Process) string {
	if p.Comm == "" {
		return strconv.Itoa(p.PID)
	}
	return fmt.Sprintf("%d (%s)", p.PID, p.Comm)
}

func limitSource(p *Process) string {
	if p == nil || p.Self {
		return "getrlimit(RLIMIT_MEMLOCK)"
	}
	return fmt.Sprintf("/proc/%d/limits", p.PID)
}

// processNote says whose limit was judged.
func processNote(p *Process) string {
	switch {
	case p == nil:
		return ""
	case p.Self:
		return " (p2pcheck's own process: a job started by slurmd, a systemd unit or a container runtime may get another limit; judge one with --pid)"
	}
	return " (process " + procName(p) + ")"
}

// rootNote says why the configured limits were judged instead of the process's.
func rootNote(p *Process) string {
	switch {
	case p == nil:
		return ""
	case p.SudoUser != "":
		return " (p2pcheck runs under sudo for " + p.SudoUser + ": root's CAP_IPC_LOCK makes its own limit moot, so the configured limits were judged)"
	case p.Self:
		return " (p2pcheck runs as root: root's CAP_IPC_LOCK makes its own limit moot, so the configured limits were judged)"
	}
	return ""
}

func judgeLimit(r Result, l Rlimit, source, note string) Result {
	r.Observed = "soft " + limitString(l.Soft) + ", hard " + limitString(l.Hard)
	r.Evidence = []Evidence{{Source: source, Value: r.Observed}}
	if l.Soft == Unlimited || l.Soft >= memlockMin {
		r.Status, r.Summary = Pass, "locked-memory limit "+limitString(l.Soft)+note
		return r
	}
	r.Status, r.Blocks = Fail, []Capability{CapGDR}
	r.Summary = "locked-memory limit " + limitString(l.Soft) + " is too low for RDMA registrations" + note
	r.Remediation = []string{memlockFix}
	return r
}

const memlockFix = "add the line * - memlock unlimited to /etc/security/limits.conf (login sessions), LimitMEMLOCK=infinity in the unit of " +
	"services that start jobs (slurmd, containerd) or DefaultLimitMEMLOCK=infinity in /etc/systemd/system.conf, " +
	"and --ulimit memlock=-1 for docker run"

// judgeConfigured judges the configured limits: each source that sets one must
// be high enough; with none set, sessions inherit the kernel's default (8 MiB
// since Linux 5.16, 64 KiB before: MLOCK_LIMIT in include/uapi/linux/resource.h).
func judgeConfigured(r Result, c *MemlockConfig, note string) Result {
	r.Evidence = []Evidence{{Source: "files read", Value: strings.Join(c.Read, " ")}}
	var low, set []string
	for _, cl := range []struct {
		what string
		l    *ConfiguredLimit
	}{{"login sessions", c.Session}, {"systemd services", c.Services}} {
		if cl.l == nil {
			continue
		}
		v := limitString(cl.l.Soft)
		r.Evidence = append(r.Evidence, Evidence{Source: cl.l.Source, Value: "soft " + v + ", hard " + limitString(cl.l.Hard)})
		set = append(set, cl.what+" "+v)
		st := Pass
		if cl.l.Soft != Unlimited && cl.l.Soft < memlockMin {
			st = Fail
			low = append(low, cl.what+" "+v)
		}
		r.Findings = append(r.Findings, Finding{Subject: cl.what, Status: st, Message: "soft limit " + v + " from " + cl.l.Source})
	}
	switch {
	case len(set) == 0:
		r.Status, r.Blocks = Fail, []Capability{CapGDR}
		r.Observed = "no memlock setting"
		r.Summary = "no configured memlock limit: sessions and services keep the kernel's default (8 MiB, 64 KiB before Linux 5.16), too low for RDMA registrations" + note
		r.Remediation = []string{memlockFix}
	case len(low) > 0:
		r.Status, r.Blocks = Fail, []Capability{CapGDR}
		r.Observed = strings.Join(set, "; ")
		r.Summary = "configured locked-memory limit too low for RDMA registrations: " + strings.Join(low, ", ") + note
		r.Remediation = []string{memlockFix}
	default:
		r.Status = Pass
		r.Observed = strings.Join(set, "; ")
		r.Summary = "configured locked-memory limit: " + strings.Join(set, ", ") + note
	}
	return r
}

func limitString(v uint64) string {
	if v == Unlimited {
		return "unlimited"
	}
	return bytesize.Format(v)
}

// ParseLimitsConf returns the memlock limit that the wildcard ("*") entries of a
// pam_limits file set (limits.conf(5): "<domain> <type> <item> <value>", type
// soft, hard or "-" for both, value in KiB or unlimited/infinity/-1, '#' starting
// a comment), later lines overriding earlier ones; nil when the file sets none.
// Entries for named users and groups are left out: they are not every job's.
func ParseLimitsConf(name string, b []byte) *ConfiguredLimit {
	var l *ConfiguredLimit
	n := 0
	for line := range strings.Lines(string(b)) {
		n++
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) != 4 || fields[0] != "*" || fields[2] != "memlock" {
			continue
		}
		v, ok := parseLimitsValue(fields[3])
		if !ok || !slices.Contains([]string{"soft", "hard", "-"}, fields[1]) {
			continue
		}
		if l == nil {
			l = &ConfiguredLimit{Rlimit: Rlimit{Soft: Unlimited, Hard: Unlimited}}
		}
		switch fields[1] {
		case "soft":
			l.Soft = v
		case "hard":
			l.Hard = v
		case "-":
			l.Soft, l.Hard = v, v
		}
		l.Source = fmt.Sprintf("%s:%d", name, n)
	}
	return l
}

// parseLimitsValue reads a limits.conf value: KiB, or unlimited, infinity, -1.
func parseLimitsValue(s string) (uint64, bool) {
	switch strings.ToLower(s) {
	case "unlimited", "infinity", "-1":
		return Unlimited, true
	}
	kib, err := strconv.ParseUint(s, 10, 64)
	if err != nil || kib > Unlimited>>10 {
		return 0, false
	}
	return kib << 10, true
}

// ParseSystemdMemlock returns DefaultLimitMEMLOCK from a systemd manager
// configuration file (systemd-system.conf(5), [Manager] section): "soft:hard" or
// one value for both, each infinity or bytes with an optional K, M, G, T, P or E
// suffix (base 1024); nil when the file does not set it or sets it unreadably.
func ParseSystemdMemlock(name string, b []byte) *ConfiguredLimit {
	var l *ConfiguredLimit
	n := 0
	section := ""
	for line := range strings.Lines(string(b)) {
		n++
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || section != "[Manager]" || strings.TrimSpace(k) != "DefaultLimitMEMLOCK" {
			continue
		}
		soft, hard, two := strings.Cut(strings.TrimSpace(v), ":")
		if !two {
			hard = soft
		}
		s, ok1 := parseSystemdSize(soft)
		h, ok2 := parseSystemdSize(hard)
		if !ok1 || !ok2 {
			continue
		}
		l = &ConfiguredLimit{Rlimit: Rlimit{Soft: s, Hard: h}, Source: fmt.Sprintf("%s:%d", name, n)}
	}
	return l
}

func parseSystemdSize(s string) (uint64, bool) {
	s = strings.TrimSpace(s)
	if s == "infinity" {
		return Unlimited, true
	}
	shift := 0
	if s != "" {
		if i := strings.IndexByte("KMGTPE", s[len(s)-1]); i >= 0 {
			shift, s = 10*(i+1), s[:len(s)-1]
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v > Unlimited>>shift {
		return 0, false
	}
	return v << shift, true
}
