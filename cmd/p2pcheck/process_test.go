package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/node"
)

func TestValidatePID(t *testing.T) {
	for _, tt := range []struct {
		name    string
		o       globalOptions
		pid     int
		wantErr bool
	}{
		{"none", globalOptions{root: "/"}, 0, false},
		{"self", globalOptions{root: "/"}, os.Getpid(), false},
		{"negative", globalOptions{root: "/"}, -3, true},
		{"snapshot", globalOptions{root: "/", snapshot: "x.tar.gz"}, os.Getpid(), true},
		{"other root", globalOptions{root: t.TempDir()}, os.Getpid(), true},
		{"missing", globalOptions{root: "/"}, 1 << 30, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ro := &reportOptions{global: &tt.o, pid: tt.pid}
			if err := ro.validatePID(); (err != nil) != tt.wantErr {
				t.Errorf("validatePID() = %v, want error %t", err, tt.wantErr)
			}
		})
	}
}

func TestMemlockConfig(t *testing.T) {
	root := t.TempDir()
	for name, content := range map[string]string{
		"etc/security/limits.conf":           "* soft memlock 65536\n",
		"etc/security/limits.d/90-rdma.conf": "* - memlock unlimited\n",
		"etc/systemd/system.conf":            "[Manager]\nDefaultLimitMEMLOCK=8M\n",
	} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := memlockConfig(openRoot(t, root), &node.Node{})
	want := &check.MemlockConfig{
		Session:  &check.ConfiguredLimit{Rlimit: check.Rlimit{Soft: check.Unlimited, Hard: check.Unlimited}, Source: "/etc/security/limits.d/90-rdma.conf:1"},
		Services: &check.ConfiguredLimit{Rlimit: check.Rlimit{Soft: 8 << 20, Hard: 8 << 20}, Source: "/etc/systemd/system.conf:2"},
		Read:     []string{"/etc/security/limits.conf", "/etc/security/limits.d/90-rdma.conf", "/etc/systemd/system.conf"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("memlockConfig (-want +got):\n%s", diff)
	}
	if got := memlockConfig(openRoot(t, t.TempDir()), &node.Node{}); got != nil {
		t.Errorf("memlockConfig of an empty root = %+v, want nil", got)
	}
}

// TestJobProcess judges this test's own process by --pid: its limit and
// environment are read from /proc like a job's.
func TestJobProcess(t *testing.T) {
	if _, err := os.Stat("/proc/" + strconv.Itoa(os.Getpid()) + "/environ"); err != nil {
		t.Skip("no /proc here")
	}
	ro := &reportOptions{global: &globalOptions{root: "/"}, pid: os.Getpid()}
	in := check.Inputs{Source: check.Live}
	ro.processInputs(&in, &node.Node{})
	if in.Process == nil || in.Process.Self || in.Process.PID != os.Getpid() || in.Memlock == nil {
		t.Fatalf("process %+v, memlock %v: want this process read by pid", in.Process, in.Memlock)
	}
	if in.NCCLEnv == nil {
		t.Errorf("NCCLEnv nil: environ unread (%s)", in.Process.EnvErr)
	}
}

// openRoot opens dir as a hostfs root closed with the test.
func openRoot(t *testing.T, dir string) hostfs.Root {
	t.Helper()
	r, err := hostfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}
