package check_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/p2pkit/p2pkit/check"
)

func TestMemlockRules(t *testing.T) {
	yes := true
	user := &check.Process{PID: 4242, Self: true, EUID: 1000}
	sudo := &check.Process{PID: 4242, Self: true, EUID: 0, SudoUser: "alice", CapIPCLock: &yes}
	job := &check.Process{PID: 777, Comm: "python", EUID: 1000}
	unlimitedConf := &check.MemlockConfig{Read: []string{"/etc/security/limits.conf"},
		Session: &check.ConfiguredLimit{Rlimit: check.Rlimit{Soft: check.Unlimited, Hard: check.Unlimited}, Source: "/etc/security/limits.conf:12"}}
	lowServices := &check.MemlockConfig{Read: []string{"/etc/security/limits.conf", "/etc/systemd/system.conf"},
		Session:  unlimitedConf.Session,
		Services: &check.ConfiguredLimit{Rlimit: check.Rlimit{Soft: 8 << 20, Hard: 8 << 20}, Source: "/etc/systemd/system.conf:40"}}
	for _, tt := range []struct {
		name string
		in   check.Inputs
		want verdict
	}{
		{"snapshot", check.Inputs{}, verdict{check.Skip, nil, "unknown for a snapshot", ""}},
		{"own process, unlimited", check.Inputs{Process: user, Memlock: &check.Rlimit{Soft: check.Unlimited, Hard: check.Unlimited}},
			verdict{check.Pass, nil, "unlimited (p2pcheck's own process", ""}},
		{"own process, 64 GiB", check.Inputs{Process: user, Memlock: &check.Rlimit{Soft: 64 << 30, Hard: 64 << 30}}, verdict{check.Pass, nil, "64 GiB", ""}},
		{"own process, 8 MiB", check.Inputs{Process: user, Memlock: &check.Rlimit{Soft: 8 << 20, Hard: check.Unlimited}},
			verdict{check.Fail, gdr, "8 MiB is too low", "memlock unlimited"}},
		{"job by pid, 8 MiB", check.Inputs{Process: job, Memlock: &check.Rlimit{Soft: 8 << 20, Hard: 8 << 20}},
			verdict{check.Fail, gdr, "(process 777 (python))", "memlock unlimited"}},
		{"job with CAP_IPC_LOCK", check.Inputs{Process: &check.Process{PID: 777, EUID: 1000, CapIPCLock: &yes}, Memlock: &check.Rlimit{Soft: 64 << 10}},
			verdict{check.Pass, nil, "has CAP_IPC_LOCK", ""}},
		// Under sudo the own limit is moot: the configured limits are judged instead.
		{"sudo, configured unlimited", check.Inputs{Process: sudo, Memlock: &check.Rlimit{Soft: 8 << 20}, MemlockConfig: unlimitedConf},
			verdict{check.Pass, nil, "runs under sudo for alice", ""}},
		{"sudo, services low", check.Inputs{Process: sudo, Memlock: &check.Rlimit{Soft: check.Unlimited}, MemlockConfig: lowServices},
			verdict{check.Fail, gdr, "systemd services 8 MiB", "LimitMEMLOCK=infinity"}},
		{"sudo, nothing configured", check.Inputs{Process: sudo, MemlockConfig: &check.MemlockConfig{Read: []string{"/etc/security/limits.conf"}}},
			verdict{check.Fail, gdr, "no configured memlock limit", "memlock unlimited"}},
		{"sudo, configuration unreadable", check.Inputs{Process: sudo, Memlock: &check.Rlimit{Soft: check.Unlimited}},
			verdict{check.Unknown, gdr, "jobs' limits are unknown", "--pid"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			judge(t, tt.want, run1(t, check.NewFacts(loadMachine(t, "amd-epyc"), tt.in), "memlock_limit"))
		})
	}
	t.Run("no RDMA NIC", func(t *testing.T) {
		in := check.Inputs{Process: user, Memlock: &check.Rlimit{Soft: 8 << 20}}
		judge(t, verdict{check.Skip, nil, "no RDMA NIC", ""}, run1(t, check.NewFacts(loadMachine(t, "degraded-link"), in), "memlock_limit"))
	})
}

func TestParseLimitsConf(t *testing.T) {
	for _, tt := range []struct {
		name, text string
		want       *check.ConfiguredLimit
	}{
		{"none", "# nothing\n@gpu soft memlock unlimited\n", nil},
		{"both", "*   -   memlock   unlimited\n", &check.ConfiguredLimit{Rlimit: check.Rlimit{Soft: check.Unlimited, Hard: check.Unlimited}, Source: "f:1"}},
		{"soft then hard", "* soft memlock 8192 # 8 MiB\n* hard memlock infinity\n",
			&check.ConfiguredLimit{Rlimit: check.Rlimit{Soft: 8 << 20, Hard: check.Unlimited}, Source: "f:2"}},
		{"garbage", "* soft memlock lots\n* bogus memlock 1\n", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, check.ParseLimitsConf("f", []byte(tt.text))); diff != "" {
				t.Errorf("ParseLimitsConf (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseSystemdMemlock(t *testing.T) {
	for _, tt := range []struct {
		name, text string
		want       *check.ConfiguredLimit
	}{
		{"unset", "[Manager]\n#DefaultLimitMEMLOCK=8M\n", nil},
		{"one value", "[Manager]\nDefaultLimitMEMLOCK=infinity\n", &check.ConfiguredLimit{Rlimit: check.Rlimit{Soft: check.Unlimited, Hard: check.Unlimited}, Source: "f:2"}},
		{"soft:hard", "[Manager]\nDefaultLimitMEMLOCK=64K:8M\n", &check.ConfiguredLimit{Rlimit: check.Rlimit{Soft: 64 << 10, Hard: 8 << 20}, Source: "f:2"}},
		{"other section", "[Other]\nDefaultLimitMEMLOCK=infinity\n", nil},
		{"overflow", "[Manager]\nDefaultLimitMEMLOCK=99999999999999E\n", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, check.ParseSystemdMemlock("f", []byte(tt.text))); diff != "" {
				t.Errorf("ParseSystemdMemlock (-want +got):\n%s", diff)
			}
		})
	}
}
