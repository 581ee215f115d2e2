package check

import (
	"path"
	"slices"
	"strings"
)

// ncclLevels are NCCL's path types in order (topoPathTypeStr in
// src/graph/topo.cc); ncclOldLevels maps the legacy numeric levels to them
// (levelsOldToNew in src/graph/paths.cc): 0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 and
// above SYS.
var (
	ncclLevels    = []string{"LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS"}
	ncclOldLevels = []string{"LOC", "PIX", "PXB", "PHB", "SYS"}
)

// ncclIgnored is what a level value NCCL does not read means: the names it
// takes are every path type of topoPathTypeStr, or a legacy number.
var ncclIgnored = "NCCL ignores this value (level names are upper case: " + strings.Join(ncclLevels, ", ") + "; or a legacy number 0-4)"

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
			return Warn, nil, ncclIgnored, true
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
			return Warn, nil, ncclIgnored, true
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
	r := Result{Refs: []string{docRef("nccl_env"), urlNCCLEnv, "NVIDIA/nccl src/misc/param.cc initEnv", "NVIDIA/nccl src/graph/paths.cc ncclGetLevel"}}
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
		r.Blocks = appendNew(r.Blocks, blocks...)
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
