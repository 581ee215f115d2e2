package check_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/p2pkit/p2pkit/check"
)

func TestNCCLEnvRules(t *testing.T) {
	conf := func(path, text string) *check.NCCLConf { return check.ParseNCCLConf(path, []byte(text)) }
	user := &check.Process{PID: 4242, Self: true, EUID: 1000}
	sudo := &check.Process{PID: 4242, Self: true, EUID: 0, SudoUser: "alice"}
	for _, tt := range []struct {
		name    string
		machine string
		in      check.Inputs
		want    verdict
	}{
		{"snapshot", "", check.Inputs{}, verdict{check.Skip, nil, "no environment", ""}},
		{"clean", "", check.Inputs{Process: user, NCCLEnv: map[string]string{"NCCL_DEBUG": "INFO"}},
			verdict{check.Pass, nil, "p2pcheck's own environment (a job's may differ: --pid)", ""}},
		{"p2p disabled", "", check.Inputs{NCCLEnv: map[string]string{"NCCL_P2P_DISABLE": "1"}},
			verdict{check.Fail, p2p, "NCCL_P2P_DISABLE=1", "unset NCCL_P2P_DISABLE"}},
		// Only strtol(value) == 1 disables (ncclGetLevel).
		{"p2p disable 2", "", check.Inputs{NCCLEnv: map[string]string{"NCCL_P2P_DISABLE": "2"}}, verdict{check.Pass, nil, "switches P2P or GPUDirect RDMA off", ""}},
		{"p2p disable 0x1", "", check.Inputs{NCCLEnv: map[string]string{"NCCL_P2P_DISABLE": "0x1"}}, verdict{check.Fail, p2p, "NCCL_P2P_DISABLE=0x1", "unset"}},
		// Legacy level 1 is PIX, not NVL (levelsOldToNew).
		{"p2p level 1", "", check.Inputs{NCCLEnv: map[string]string{"NCCL_P2P_LEVEL": "1"}}, verdict{check.Warn, nil, "NCCL_P2P_LEVEL=1", "unset NCCL_P2P_LEVEL"}},
		{"p2p level LOC", "", check.Inputs{NCCLEnv: map[string]string{"NCCL_P2P_LEVEL": "LOC"}}, verdict{check.Fail, p2p, "NCCL_P2P_LEVEL=LOC", "unset"}},
		{"p2p level NVL", "", check.Inputs{NCCLEnv: map[string]string{"NCCL_P2P_LEVEL": "NVL"}}, verdict{check.Warn, nil, "NCCL_P2P_LEVEL=NVL", "unset"}},
		{"p2p level loc is ignored", "", check.Inputs{NCCLEnv: map[string]string{"NCCL_P2P_LEVEL": "loc"}}, verdict{check.Warn, nil, "NCCL_P2P_LEVEL=loc", "unset"}},
		{"p2p level SYS", "", check.Inputs{NCCLEnv: map[string]string{"NCCL_P2P_LEVEL": "SYS"}}, verdict{check.Pass, nil, "switches P2P or GPUDirect RDMA off", ""}},
		{"conf gdr level", "", check.Inputs{NCCLConf: conf("/etc/nccl.conf", "# site\nNCCL_NET_GDR_LEVEL=LOC\n")},
			verdict{check.Fail, gdr, "NCCL_NET_GDR_LEVEL=LOC", "remove NCCL_NET_GDR_LEVEL from /etc/nccl.conf"}},
		{"socket transport", "", check.Inputs{NCCLEnv: map[string]string{"NCCL_NET": "socket"}}, verdict{check.Fail, gdr, "NCCL_NET=socket", "unset"}},
		{"ib disabled", "", check.Inputs{NCCLEnv: map[string]string{"NCCL_IB_DISABLE": "1"}}, verdict{check.Fail, gdr, "NCCL_IB_DISABLE=1", "unset"}},
		{"dmabuf off, no peermem", "amd-epyc", check.Inputs{NCCLEnv: map[string]string{"NCCL_DMABUF_ENABLE": "0"}}, verdict{check.Fail, gdr, "NCCL_DMABUF_ENABLE=0", "unset"}},
		{"dmabuf off, peermem", "dgx-h100", check.Inputs{NCCLEnv: map[string]string{"NCCL_DMABUF_ENABLE": "0"}}, verdict{check.Warn, nil, "NCCL_DMABUF_ENABLE=0", "unset"}},
		{"gdr c2c off on x86", "", check.Inputs{NCCLEnv: map[string]string{"NCCL_NET_GDR_C2C": "0"}}, verdict{check.Pass, nil, "switches", ""}},
		{"gdr c2c off on Grace", "grace-gh200", check.Inputs{NCCLEnv: map[string]string{"NCCL_NET_GDR_C2C": "0"}}, verdict{check.Warn, nil, "NCCL_NET_GDR_C2C=0", "unset"}},
		// Precedence (initEnv): environment, then NCCL_CONF_FILE or ~/.nccl.conf, then /etc/nccl.conf.
		{"env over files", "", check.Inputs{NCCLEnv: map[string]string{"NCCL_DMABUF_ENABLE": "1"},
			NCCLUserConf: conf("/home/alice/.nccl.conf", "NCCL_DMABUF_ENABLE=0\n"), NCCLConf: conf("/etc/nccl.conf", "NCCL_DMABUF_ENABLE=0\n")},
			verdict{check.Pass, nil, "switches", ""}},
		{"user conf over /etc", "", check.Inputs{NCCLUserConf: conf("/home/alice/.nccl.conf", "NCCL_P2P_DISABLE=1\n"), NCCLConf: conf("/etc/nccl.conf", "NCCL_P2P_DISABLE=0\n")},
			verdict{check.Fail, p2p, "NCCL_P2P_DISABLE=1", "remove NCCL_P2P_DISABLE from /home/alice/.nccl.conf"}},
		// sudo strips NCCL_*: never a silent pass.
		{"sudo, files clean", "", check.Inputs{Process: sudo, NCCLEnv: map[string]string{}, NCCLConf: conf("/etc/nccl.conf", "NCCL_DEBUG=WARN\n")},
			verdict{check.Warn, nil, "runs under sudo for alice", "--pid"}},
		{"sudo, no files", "", check.Inputs{Process: sudo, NCCLEnv: map[string]string{}}, verdict{check.Warn, nil, "env_reset drops", "--pid"}},
		{"job by pid", "", check.Inputs{Process: &check.Process{PID: 777, Comm: "python", EUID: 1000}, NCCLEnv: map[string]string{"NCCL_P2P_LEVEL": "PIX"}},
			verdict{check.Warn, nil, "NCCL_P2P_LEVEL=PIX", "unset NCCL_P2P_LEVEL in the job"}},
		{"job environment unreadable", "", check.Inputs{Process: &check.Process{PID: 777, EUID: 1000, EnvErr: "permission denied: run as root"}},
			verdict{check.Warn, nil, "could not be read (permission denied", "--pid"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.machine
			if m == "" {
				m = "degraded-link"
			}
			judge(t, tt.want, run1(t, check.NewFacts(loadMachine(t, m), tt.in), "nccl_env"))
		})
	}
}

func TestParseNCCLConf(t *testing.T) {
	// As NCCL's setEnvFile: no trimming, '#' only in the first column.
	got := check.ParseNCCLConf("/etc/nccl.conf", []byte("# comment\n\nNCCL_IB_HCA = mlx5_0\nnot a setting\nNCCL_SOCKET_IFNAME=eth0=x\r\n=1\n  # indented\n"))
	want := &check.NCCLConf{Path: "/etc/nccl.conf", Vars: map[string]string{"NCCL_IB_HCA ": " mlx5_0", "NCCL_SOCKET_IFNAME": "eth0=x"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseNCCLConf (-want +got):\n%s", diff)
	}
}

// FuzzProcessParsers feeds the configuration parsers hostile input: they must not
// panic, and what they return must be self-consistent.
func FuzzProcessParsers(f *testing.F) {
	for _, s := range []string{"* - memlock unlimited\n", "[Manager]\nDefaultLimitMEMLOCK=8M:16E\n", "NCCL_P2P_LEVEL=1\r\n#x\n=\n", "\x00=\xff\n", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if l := check.ParseLimitsConf("f", []byte(s)); l != nil && l.Source == "" {
			t.Errorf("limit without a source: %+v", l)
		}
		if l := check.ParseSystemdMemlock("f", []byte(s)); l != nil && l.Source == "" {
			t.Errorf("limit without a source: %+v", l)
		}
		for k := range check.ParseNCCLConf("f", []byte(s)).Vars {
			if k == "" {
				t.Errorf("empty name")
			}
		}
	})
}
