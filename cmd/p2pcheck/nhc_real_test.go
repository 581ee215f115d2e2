package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// nhcRoot returns the tree LBNL NHC was installed into (make install
// DESTDIR=...; .ci/run builds NHC 1.4.3 from ../shared/third_party and sets
// P2PKIT_NHC_ROOT), or skips: a skip fails under CI=true or P2PKIT_REQUIRE_HW=1.
func nhcRoot(t *testing.T) string {
	t.Helper()
	root := os.Getenv("P2PKIT_NHC_ROOT")
	why := ""
	switch {
	case root == "":
		why = "P2PKIT_NHC_ROOT is not set (.ci/run builds NHC 1.4.3 and sets it)"
	default:
		if _, err := os.Stat(filepath.Join(root, "usr/sbin/nhc")); err != nil {
			why = "no NHC under P2PKIT_NHC_ROOT: " + err.Error()
		}
	}
	if why == "" {
		return root
	}
	if os.Getenv("CI") == "true" || os.Getenv("P2PKIT_REQUIRE_HW") == "1" {
		t.Fatal(why)
	}
	t.Skip(why)
	return ""
}

// nhcRun is one pass of the real nhc over a configuration of one line, with
// the real node-mark-offline and stand-ins for Slurm's sinfo (the node is
// idle, no note) and scontrol (records its arguments).
type nhcRun struct {
	code    int
	drained bool   // scontrol was called
	args    string // scontrol's arguments, one per line
	reason  string // its Reason=, without the "NHC: " leader
	log     string // NHC's log
}

func runNHC(t *testing.T, nhcDir, check string, env []string, wrap []string) nhcRun {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "nhc")
	if err := os.MkdirAll(filepath.Join(conf, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	own, err := filepath.Glob(filepath.Join(nhcDir, "etc/nhc/scripts/*.nhc"))
	if err != nil || len(own) == 0 {
		t.Fatalf("no NHC scripts under %s: %v", nhcDir, err)
	}
	for _, src := range append(own, nhcScript) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(conf, "scripts", filepath.Base(src)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(conf, "nhc.conf"), []byte("* || "+check+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(dir, "scontrol.args")
	sinfo, scontrol := filepath.Join(dir, "sinfo"), filepath.Join(dir, "scontrol")
	if err := os.WriteFile(sinfo, []byte("#!/bin/sh\necho 'idle none'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(scontrol, []byte("#!/bin/sh\nprintf '%s\\n' \"$@\" >'"+rec+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	logf := filepath.Join(dir, "nhc.log")
	args := append(wrap, filepath.Join(nhcDir, "usr/sbin/nhc"), "-D", conf, "-c", filepath.Join(conf, "nhc.conf"), "-l", logf, "-t", "60",
		"NHC_RM=slurm", "HELPERDIR="+filepath.Join(nhcDir, "usr/libexec/nhc"), "RESULTFILE="+filepath.Join(dir, "nhc.status"))
	cmd := exec.Command(args[0], args[1:]...)
	// node-mark-offline runs sinfo and scontrol as its environment names them.
	cmd.Env = append(os.Environ(), append([]string{"SLURM_SINFO=" + sinfo, "SLURM_SCONTROL=" + scontrol}, env...)...)
	out, err := cmd.CombinedOutput()
	r := nhcRun{}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("nhc: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(logf)
	r.log = string(b)
	if b, err := os.ReadFile(rec); err == nil {
		r.drained, r.args = true, string(b)
		for _, l := range strings.Split(r.args, "\n") {
			if v, ok := strings.CutPrefix(l, "Reason="); ok {
				r.reason = strings.TrimPrefix(v, "NHC: ")
			}
		}
	}
	if testing.Verbose() {
		t.Logf("nhc exit %d, output %q\nscontrol: %q\nlog:\n%s", r.code, out, r.args, r.log)
	}
	return r
}

// TestNHCReal runs the real NHC with deploy/nhc/p2pcheck.nhc on fixtures and
// looks at what Slurm would be told: a healthy node is not drained; ACS on the
// peer path drains it with a reason cut at a whole word, the whole one in
// NHC's log; an unprivileged run (unknown) drains it with a reason; p2pcheck
// installed in /usr/local/bin is found though NHC resets PATH; a GPU missing
// against --expect drains it naming the GPU; a probe that could not run is no
// pass.
func TestNHCReal(t *testing.T) {
	nhcDir := nhcRoot(t)
	bin := p2pcheckScript(t)
	with := []string{"P2PCHECK=" + bin}
	for _, tt := range []struct {
		name, machine, check string
		drained              bool
		reason               string // the start of the reason
	}{
		{"healthy", "dgx-h100-acs-off", "check_p2p_static", false, ""},
		{"acs", "dgx-h100", "check_p2p_static", true, "check_p2p_static: acs_path 0000:17:00.0: ACS redirect on 26 bridge(s) between peers"},
		{"unprivileged", "dgx-h100-nonroot", "check_p2p_static", true, "check_p2p_static: p2pcheck could not evaluate this node: acs_path "},
		{"gpu missing", "dgx-h100-acs-off", "check_p2p_static -e gpus=9", true, "check_p2p_static: inventory GPU: devices missing: found 8 of 9 GPU"},
		{"probe not run", "dgx-h100-acs-off", "check_p2p_probe", true, "check_p2p_probe: p2pcheck could not evaluate this node: p2p_data_integrity: nothing was judged"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := machineRoot(t, tt.machine)
			r := runNHC(t, nhcDir, tt.check+" -r "+root, with, nil)
			if r.drained != tt.drained || !strings.HasPrefix(r.reason, tt.reason) {
				t.Fatalf("drained %v (exit %d) with reason %q; want %v and a reason starting %q\nlog:\n%s", r.drained, r.code, r.reason, tt.drained, tt.reason, r.log)
			}
			if !tt.drained {
				if r.code != 0 || strings.Contains(r.log, "Health check failed") {
					t.Errorf("nhc exit %d, log:\n%s", r.code, r.log)
				}
				return
			}
			if !strings.Contains(r.args, "State=DRAIN") || !strings.Contains(r.log, "Health check failed:  "+r.reason) {
				t.Errorf("scontrol %q, log:\n%s", r.args, r.log)
			}
			checkWhole(t, r)
		})
	}
	t.Run("in /usr/local/bin", func(t *testing.T) {
		unshare, err := exec.LookPath("unshare")
		if err != nil {
			t.Skip("no unshare(1) to give the test its own /usr/local/bin")
		}
		// A mount namespace of the test's own, in which a directory holding
		// p2pcheck is bind-mounted on /usr/local/bin: the real one is untouched.
		local := filepath.Join(t.TempDir(), "local-bin")
		if err := os.MkdirAll(local, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(bin, filepath.Join(local, "p2pcheck")); err != nil {
			t.Fatal(err)
		}
		flags := "-m"
		if os.Getuid() != 0 {
			flags = "-rm"
		}
		if out, err := exec.Command(unshare, flags, "true").CombinedOutput(); err != nil {
			t.Skipf("no mount namespace here (%v: %s)", err, out)
		}
		wrap := []string{unshare, flags, "sh", "-c", `mount --bind "$0" /usr/local/bin && exec "$@"`, local}
		// ACS on: drained with acs_path's reason, so p2pcheck was found and ran.
		r := runNHC(t, nhcDir, "check_p2p_static -r "+machineRoot(t, "dgx-h100"), []string{"P2PCHECK=", "HOME=/nonexistent"}, wrap)
		if !strings.HasPrefix(r.reason, "check_p2p_static: acs_path ") {
			t.Fatalf("reason %q (exit %d), want acs_path's: p2pcheck in /usr/local/bin not found?\nlog:\n%s", r.reason, r.code, r.log)
		}
	})
}

// checkWhole: the reason is at most 300 characters and a run of whole words of
// the whole reason: when cut, it ends in " …" and the whole reason is in
// NHC's log.
func checkWhole(t *testing.T, r nhcRun) {
	t.Helper()
	if r.reason == "" {
		t.Fatal("empty reason")
	}
	if n := len([]rune(r.reason)); n > 300 {
		t.Errorf("reason of %d characters", n)
	}
	short, cut := strings.CutSuffix(r.reason, " …")
	if !cut {
		return
	}
	i := strings.Index(r.log, "whole reason: ")
	if i < 0 {
		t.Fatalf("reason cut but no whole reason in the log:\n%s", r.log)
	}
	whole := r.log[i+len("whole reason: "):]
	whole, _, _ = strings.Cut(whole, "\n")
	if !strings.HasPrefix(whole, short+" ") {
		t.Errorf("reason %q is not whole words of %q", short, whole)
	}
}
