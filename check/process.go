package check

import (
	"fmt"
	"path"
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
	r := Result{Refs: []string{checkDoc("memlock_limit"), "getrlimit(2)", "limits.conf(5)", "systemd-system.conf(5) DefaultLimitMEMLOCK", "linux drivers/infiniband/core/umem.c ib_umem_get"}}
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

// ncclLevels are NCCL's path types in order (topoPathTypeStr in
// src/graph/topo.cc); ncclOldLevels maps the legacy numeric levels to them
// (levelsOldToNew in src/graph/paths.cc): 0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 and
// above SYS.
var (
	ncclLevels    = []string{"LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS"}
	ncclOldLevels = []string{"LOC", "PIX", "PXB", "PHB", "SYS"}
)

// ncclLevel reads a level variable as ncclGetLevel does (src/graph/paths.cc): an
// exact, case-sensitive path type name, else a legacy number when the value
// starts with a digit; ok is false for a value NCCL ignores.
func ncclLevel(v string) (level string, ok bool) {
	if slices.Contains(ncclLevels, v) {
		return v, true
	}
	if v != "" && v[0] >= '0' && v[0] <= '9' {
		n := cStrtol(v)
		return ncclOldLevels[min(max(n, 0), int64(len(ncclOldLevels)-1))], true
	}
	return "", false
}

// cStrtol reads the integer at the start of s as C's strtol(s, NULL, 0) does:
// leading blanks, a sign, a 0x or 0 prefix for hex or octal, digits up to the
// first that does not belong; 0 when there are none. It saturates instead of
// overflowing.
func cStrtol(s string) int64 {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg, s = s[0] == '-', s[1:]
	}
	base := int64(10)
	switch {
	case len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && strings.ContainsRune("0123456789abcdefABCDEF", rune(s[2])):
		base, s = 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		base = 8
	}
	var v int64
	for _, c := range []byte(s) {
		d := int64(strings.IndexByte("0123456789abcdef", c|0x20))
		if c >= '0' && c <= '9' {
			d = int64(c - '0')
		}
		if d < 0 || d >= base {
			break
		}
		if v > (1<<62)/base {
			v = 1 << 62
			continue
		}
		v = v*base + d
	}
	if neg {
		return -v
	}
	return v
}

// ncclRule judges one NCCL setting: the status it earns, what it blocks and what
// it means; ok is false when the value changes nothing that matters here.
type ncclRule func(f *Facts, v string) (s Status, blocks []Capability, meaning string, ok bool)

// ncclRules are the NCCL settings that switch off or narrow a peer path, each
// read as NCCL reads it.
var ncclRules = []struct {
	name string
	rule ncclRule
}{
	// src/graph/paths.cc ncclGetLevel: only strtol(value) == 1 disables.
	{"NCCL_P2P_DISABLE", func(_ *Facts, v string) (Status, []Capability, string, bool) {
		return Fail, []Capability{CapP2P}, "disables P2P between GPUs, NVLink included", cStrtol(v) == 1
	}},
	// src/graph/paths.cc ncclTopoCheckP2p: P2P where the path type <= the level
	// (default PXB). NCCL_P2P_DISABLE=1 takes precedence.
	{"NCCL_P2P_LEVEL", func(f *Facts, v string) (Status, []Capability, string, bool) {
		if cStrtol(f.ncclSetting("NCCL_P2P_DISABLE")) == 1 {
			return Pass, nil, "", false
		}
		l, ok := ncclLevel(v)
		switch {
		case !ok:
			return Warn, nil, "NCCL ignores this value (level names are upper case: LOC, NVL, PIX, PXB, PHB, SYS)", true
		case l == "LOC":
			return Fail, []Capability{CapP2P}, "level LOC: P2P off between every pair, NVLink included", true
		case l == "NVL" || l == "NVB" || l == "C2C":
			return Warn, nil, "level " + l + ": P2P over NVLink only, none over PCIe", true
		case l == "PIX":
			return Warn, nil, "level PIX: PCIe P2P only between GPUs behind one PCIe switch", true
		}
		return Pass, nil, "", false
	}},
	// src/graph/paths.cc ncclTopoCheckGdr: GPUDirect RDMA where the GPU-NIC path
	// type <= the level; no NIC is closer than PIX.
	{"NCCL_NET_GDR_LEVEL", func(_ *Facts, v string) (Status, []Capability, string, bool) {
		l, ok := ncclLevel(v)
		switch {
		case !ok:
			return Warn, nil, "NCCL ignores this value (level names are upper case: LOC, PIX, PXB, PHB, SYS)", true
		case l == "LOC" || l == "NVL" || l == "NVB" || l == "C2C":
			return Fail, []Capability{CapGDR}, "level " + l + ": no NIC is that close, GPUDirect RDMA is off", true
		case l == "PIX":
			return Warn, nil, "level PIX: GPUDirect RDMA only with NICs behind the GPU's PCIe switch", true
		}
		return Pass, nil, "", false
	}},
	// src/graph/paths.cc NCCL_PARAM(NetGdrC2c, 1): on C2C platforms (Grace) the
	// CPU-attached NICs get GPUDirect RDMA through the C2C path (PATH_P2C).
	{"NCCL_NET_GDR_C2C", func(f *Facts, v string) (Status, []Capability, string, bool) {
		if !f.Arm64() {
			return Pass, nil, "", false
		}
		return Warn, nil, "0 turns GPUDirect RDMA off for NICs reached through the CPU's C2C link (Grace)", cStrtol(v) == 0
	}},
	// src/transport/net_ib/init.cc NCCL_PARAM(IbDisable, 0): any non-zero value.
	{"NCCL_IB_DISABLE", func(_ *Facts, v string) (Status, []Capability, string, bool) {
		return Fail, []Capability{CapGDR}, "disables InfiniBand/RoCE: traffic falls back to sockets, no GPUDirect RDMA", cStrtol(v) != 0
	}},
	// src/init.cc and src/plugin/net.cc: the network named (case-insensitive).
	{"NCCL_NET", func(_ *Facts, v string) (Status, []Capability, string, bool) {
		return Fail, []Capability{CapGDR}, "selects the socket transport: no GPUDirect RDMA", strings.EqualFold(v, "Socket")
	}},
	// src/init.cc NCCL_PARAM(DmaBufEnable, 1), since NCCL 2.13.
	{"NCCL_DMABUF_ENABLE", func(f *Facts, v string) (Status, []Capability, string, bool) {
		if f.peermem() {
			return Warn, nil, "disables DMA-BUF registration: GPUDirect RDMA only through nvidia-peermem", cStrtol(v) == 0
		}
		return Fail, []Capability{CapGDR}, "disables DMA-BUF registration, and no nvidia-peermem is loaded: no GPUDirect RDMA", cStrtol(v) == 0
	}},
	// src/transport/shm.cc NCCL_PARAM(ShmDisable, 0).
	{"NCCL_SHM_DISABLE", func(_ *Facts, v string) (Status, []Capability, string, bool) {
		return Warn, nil, "disables the shared-memory transport, NCCL's intra-node fallback where P2P is off", cStrtol(v) != 0
	}},
}

// ncclSetting is the value NCCL sees for name, or "".
func (f *Facts) ncclSetting(name string) string {
	return f.ncclEffective()[name].value
}

type ncclValue struct{ value, from string }

// ncclEffective merges the NCCL settings as NCCL's initEnv does
// (src/misc/param.cc): the environment first, then the file NCCL_CONF_FILE names
// or ~/.nccl.conf, then /etc/nccl.conf, each filling only what is still unset
// (setenv without overwrite).
func (f *Facts) ncclEffective() map[string]ncclValue {
	out := map[string]ncclValue{}
	for k, v := range f.NCCLEnv {
		out[k] = ncclValue{v, "environment"}
	}
	for _, c := range []*NCCLConf{f.NCCLUserConf, f.NCCLConf} {
		if c == nil {
			continue
		}
		for k, v := range c.Vars {
			if _, ok := out[k]; !ok {
				out[k] = ncclValue{v, c.Path}
			}
		}
	}
	return out
}

// checkNCCLEnv finds NCCL settings that switch off or narrow P2P or GPUDirect
// RDMA, each read the way NCCL reads it (see ncclRules), in the environment of
// the judged process (--pid, else p2pcheck's own) and the configuration files
// in NCCL's precedence (ncclEffective). Under sudo, p2pcheck's own environment
// is not the caller's (env_reset drops NCCL_*): the files are judged and the
// result warns that the environment was not.
func checkNCCLEnv(f *Facts) Result {
	r := Result{Refs: []string{checkDoc("nccl_env"), urlNCCLEnv, "NVIDIA/nccl src/misc/param.cc initEnv", "NVIDIA/nccl src/graph/paths.cc ncclGetLevel"}}
	pr := f.Process
	envJudged := f.NCCLEnv != nil && !(pr != nil && pr.Self && pr.SudoUser != "")
	if !envJudged && f.NCCLConf == nil && f.NCCLUserConf == nil {
		r.Status = Skip
		r.Summary = "no environment to read (snapshot or another root) and no /etc/nccl.conf"
		if pr != nil {
			r.Status = Warn
			r.Summary = "no NCCL configuration file, and " + envCaveat(pr)
			r.Remediation = []string{"run p2pcheck --pid <PID of a job process> to judge a job's NCCL environment"}
		}
		return r
	}
	eff := f.ncclEffective()
	if !envJudged {
		for k, v := range eff {
			if v.from == "environment" {
				delete(eff, k)
			}
		}
	}
	names := make([]string, 0, len(eff))
	for k := range eff {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		r.Evidence = append(r.Evidence, Evidence{Source: eff[k].from, Value: k + "=" + eff[k].value})
	}
	r.Status = Pass
	for _, rule := range ncclRules {
		v, ok := eff[rule.name]
		if !ok {
			continue
		}
		s, blocks, meaning, bad := rule.rule(f, v.value)
		if !bad {
			continue
		}
		r.Status = worse(r.Status, s)
		for _, b := range blocks {
			r.Blocks = appendCap(r.Blocks, b)
		}
		subj := rule.name + "=" + v.value
		r.Subjects = append(r.Subjects, subj)
		r.Findings = append(r.Findings, Finding{Subject: subj, Status: s, Message: meaning + " (from " + v.from + ")"})
		if v.from == "environment" {
			r.Remediation = append(r.Remediation, "unset "+rule.name+" in the job's environment")
		} else {
			r.Remediation = append(r.Remediation, "remove "+rule.name+" from "+v.from)
		}
	}
	if r.Status != Fail {
		r.Blocks = nil
	}
	r.Observed = "no NCCL_* settings"
	if len(names) > 0 {
		r.Observed = strings.Join(names, ", ")
	}
	where := settingsWhere(f, envJudged, pr)
	switch {
	case r.Status == Pass && !envJudged && pr != nil:
		r.Status = Warn
		r.Summary = "no NCCL setting in " + where + " switches a peer path off, but " + envCaveat(pr)
		r.Remediation = []string{"run p2pcheck --pid <PID of a job process> to judge a job's NCCL environment"}
	case r.Status == Pass:
		r.Summary = "no NCCL setting in " + where + " switches P2P or GPUDirect RDMA off"
	default:
		r.Summary = "NCCL settings narrow or switch off peer paths: " + strings.Join(r.Subjects, ", ")
		if !envJudged && pr != nil {
			r.Summary += "; " + envCaveat(pr)
		}
	}
	return r
}

// settingsWhere names what checkNCCLEnv read.
func settingsWhere(f *Facts, envJudged bool, pr *Process) string {
	var w []string
	switch {
	case envJudged && pr != nil && !pr.Self:
		w = append(w, "the environment of process "+procName(pr))
	case envJudged && pr != nil:
		w = append(w, "p2pcheck's own environment (a job's may differ: --pid)")
	case envJudged:
		w = append(w, "the environment")
	}
	for _, c := range []*NCCLConf{f.NCCLUserConf, f.NCCLConf} {
		if c != nil {
			w = append(w, c.Path)
		}
	}
	return strings.Join(w, " and ")
}

// envCaveat says why p2pcheck's own environment was not judged.
func envCaveat(p *Process) string {
	switch {
	case p.EnvErr != "":
		return "the environment of process " + procName(p) + " could not be read (" + p.EnvErr + ")"
	}
	return "p2pcheck runs under sudo for " + p.SudoUser + ", whose env_reset drops the caller's NCCL_* variables: a job's environment was not judged"
}

// ParseNCCLConf parses an NCCL configuration file (/etc/nccl.conf, ~/.nccl.conf,
// the file NCCL_CONF_FILE names) exactly as NCCL's setEnvFile reads it
// (src/misc/param.cc): per line, a trailing newline and carriage return are
// dropped, a line starting with '#' is a comment, the name is everything before
// the first '=' and the value everything after it, blanks included; lines without
// '=' or with an empty name are ignored.
func ParseNCCLConf(file string, b []byte) *NCCLConf {
	c := &NCCLConf{Path: path.Clean(file), Vars: map[string]string{}}
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" {
			continue
		}
		c.Vars[k] = v
	}
	return c
}
