package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDaemonSetCommand runs the command line of deploy/kubernetes/daemonset.yaml
// (its container's command list) against a fixture, without --interval and
// with the output paths moved to a temporary directory: every flag the
// manifest gives must be one p2pcheck takes, and the files get written.
func TestDaemonSetCommand(t *testing.T) {
	b, err := os.ReadFile("../../deploy/kubernetes/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	in := false
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		switch {
		case line == "command:":
			in = true
		case in && strings.HasPrefix(line, "- "):
			args = append(args, strings.TrimPrefix(line, "- "))
		case in:
			in = false
		}
	}
	if len(args) < 2 || args[0] != "/usr/bin/p2pcheck" {
		t.Fatalf("command %q, want /usr/bin/p2pcheck and flags", args)
	}
	root, dir := machineRoot(t, "dgx-h100"), t.TempDir() // ACS redirect between peers fails
	// The host's /etc is mounted under the root: nccl_env judges its nccl.conf.
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "nccl.conf"), []byte("NCCL_P2P_DISABLE=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var run []string
	for _, a := range args[1:] {
		name, value, _ := strings.Cut(a, "=")
		switch name {
		case "--interval":
			continue
		case "--root":
			value = root
		case "--nfd", "--prometheus":
			value = filepath.Join(dir, filepath.Base(value))
		}
		if value != "" {
			a = name + "=" + value
		}
		run = append(run, a)
	}
	code, _, stderr := p2pcheck(run...)
	if code != exitFail {
		t.Fatalf("p2pcheck %q: exit %d, want 1 (the fixture fails a check)\n%s", run, code, stderr)
	}
	if names := dirNames(t, dir); len(names) != 2 {
		t.Errorf("wrote %q, want the NFD file and the textfile", names)
	}
	prom, err := os.ReadFile(filepath.Join(dir, "p2pcheck.prom"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `p2pcheck_check_status{check="nccl_env",subject=""} 2`; !strings.Contains(string(prom), want+"\n") {
		t.Errorf("the textfile lacks %s: nccl_env did not judge the host's /etc/nccl.conf", want)
	}
}
