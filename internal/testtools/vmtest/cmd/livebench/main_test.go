package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGuestScript runs the guest's script under busybox on this machine, as the
// guest's initramfs runs it (busybox's applets on PATH), with stand-in commands, and
// reads its output back: every command is timed in every round, its output summed,
// and the report names each with the ratio to the last.
func TestGuestScript(t *testing.T) {
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("no busybox (apt-get install busybox-static)")
	}
	bin := t.TempDir()
	for _, applet := range []string{"sh", "time", "md5sum", "ls", "wc", "tr", "echo", "true", "sleep"} {
		if err := os.Symlink(busybox, filepath.Join(bin, applet)); err != nil {
			t.Fatal(err)
		}
	}
	cmds := []bench{{name: "one", sh: "sleep 0.01"}, {name: "two", sh: "echo 'two words'"}, {name: "anchor", sh: "true"}}
	cmd := exec.Command(busybox, "sh", "-c", guestScript(cmds, 3))
	cmd.Env = []string{"PATH=" + bin}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := strings.Count(string(out), "\nT "); got != 9 {
		t.Errorf("%d timed runs, want 9:\n%s", got, out)
	}
	var rep bytes.Buffer
	if err := report(&rep, cmds, out, time.Second); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"3 rounds", "one ", "two ", "anchor ", "exit 0 md5 ", "one / anchor", "two / anchor"} {
		if !strings.Contains(rep.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, rep.String())
		}
	}
	for _, c := range cmds {
		if len(c.wall) != 3 || len(c.cpu) != 3 {
			t.Errorf("%s: %d wall and %d CPU times, want 3 each", c.name, len(c.wall), len(c.cpu))
		}
	}
}

// TestReportBadLine: a timing line that does not parse is an error, not a zero.
func TestReportBadLine(t *testing.T) {
	cmds := []bench{{name: "a"}}
	if err := report(&bytes.Buffer{}, cmds, []byte("T 0 real x user 0.1 sys 0.1\n"), 0); err == nil {
		t.Error("a bad time was taken")
	}
	if err := report(&bytes.Buffer{}, cmds, []byte("T 5 real 1 user 0.1 sys 0.1\n"), 0); err == nil {
		t.Error("a command index out of range was taken")
	}
}
