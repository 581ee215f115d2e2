package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSnapshotFlagNotRegular reproduces what is left of #21 for --snapshot: f0912a0
// opened the file with os.Open, so a FIFO blocked the command for ever (waiting for
// a writer) and a device node was read until the decoder gave up. Each is now
// refused before it is opened, with the reason, as an unreadable snapshot (exit 3).
// finish fails the test only if the command never returns within its minute, which
// does not depend on the machine's speed.
func TestSnapshotFlagNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "snap.tar.gz")
	mkfifo(t, fifo)
	cases := []struct {
		name, path, want string
	}{
		{"fifo", fifo, "not a regular file"},
		{"directory", dir, "is a directory"},
	}
	if fi, err := os.Stat("/dev/zero"); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		cases = append(cases, struct{ name, path, want string }{"device", "/dev/zero", "a character device"})
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			for _, args := range [][]string{
				{"--snapshot", tt.path, "topo"},
				{"--snapshot", tt.path, "--no-nvml", "--quick"},
			} {
				code, _, stderr := finish(t, args...)
				if code != exitNoEval {
					t.Errorf("%v: exit %d, want %d (an unreadable snapshot):\n%s", args, code, exitNoEval, stderr)
				}
				if !strings.Contains(stderr, tt.path) || !strings.Contains(stderr, tt.want) {
					t.Errorf("%v: stderr does not name %s and %q:\n%s", args, tt.path, tt.want, stderr)
				}
			}
		})
	}
}
