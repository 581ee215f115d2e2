package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
)

// failWriter fails every write, as standard output on a full disk does.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// TestExitCodesIO: I/O errors and internal errors exit 3 with a clear message;
// only usage errors exit 64 and point to --help.
func TestExitCodesIO(t *testing.T) {
	root := machineRoot(t, "degraded-link")
	missing := filepath.Join(t.TempDir(), "missing", "snap.tar.gz")
	for _, tt := range []struct {
		name   string
		args   []string
		stdout interface{ Write([]byte) (int, error) }
		code   int
		stderr string
	}{
		{"stdout full", []string{"--root", root}, failWriter{}, exitNoEval, "no space left on device"},
		{"stdout full json", []string{"--root", root, "topo", "--format", "json"}, failWriter{}, exitNoEval, "no space left on device"},
		{"snapshot into a missing directory", []string{"--root", root, "snapshot", "-o", missing}, &bytes.Buffer{}, exitNoEval, "writing " + missing},
		{"unknown flag", []string{"--bogus"}, &bytes.Buffer{}, exitUsage, "unknown flag: --bogus (run 'p2pcheck --help')"},
		{"unknown command", []string{"bogus"}, &bytes.Buffer{}, exitUsage, `unexpected argument "bogus"`},
		{"bad interval", []string{"--root", root, "--interval", "-1s"}, &bytes.Buffer{}, exitUsage, "--interval must be at least 10s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := run(tt.args, tt.stdout, &stderr)
			if code != tt.code || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr.String(), tt.code, tt.stderr)
			}
			if tt.code != exitUsage && strings.Contains(stderr.String(), "--help") {
				t.Errorf("stderr %q points to --help for an error that is not about usage", stderr.String())
			}
		})
	}
}

// TestPanicExit: a panic inside a command exits 3 with the stack, never the
// runtime's 2 (which means "warnings").
func TestPanicExit(t *testing.T) {
	root := machineRoot(t, "degraded-link")
	defer func(h func() (string, error)) { hostname = h }(hostname)
	hostname = func() (string, error) { panic("boom") }
	code, _, stderr := p2pcheck("--root", root)
	if code != exitNoEval || !strings.Contains(stderr, "p2pcheck: internal error: boom") || !strings.Contains(stderr, "goroutine") {
		t.Errorf("exit %d, stderr %q; want 3, the panic and its stack", code, stderr)
	}
}

// TestFleetFilesUnevaluated: a run that cannot read the machine replaces the
// previous files with p2pcheck_up 0, the run's timestamp and ready=false, so
// they never go stale silently.
func TestFleetFilesUnevaluated(t *testing.T) {
	dir := t.TempDir()
	prom, nfd := filepath.Join(dir, "p2pcheck.prom"), filepath.Join(dir, "p2pcheck")
	for _, f := range []string{prom, nfd} {
		if err := os.WriteFile(f, []byte("previous run\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, _, stderr := p2pcheck("--root", filepath.Join(dir, "missing"), "--prometheus", prom, "--nfd", nfd, "--nfd-expiry", "10m")
	if code != exitNoEval {
		t.Fatalf("exit %d (%s), want 3", code, stderr)
	}
	fams := testsupport.MetricsFile(t, prom)
	for name, want := range map[string]float64{
		"p2pcheck_up":                         0,
		"p2pcheck_exit_code":                  3,
		"p2pcheck_last_run_timestamp_seconds": float64(now().Unix()),
	} {
		if g := fams[name]; g == nil || g.GetMetric()[0].GetGauge().GetValue() != want {
			t.Errorf("%s = %v, want %v", name, g, want)
		}
	}
	b, err := os.ReadFile(nfd)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# +expiry-time=2026-11-30T05:10:00Z\n", "feature.node.kubernetes.io/p2pcheck.ready=false\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("NFD file lacks %q:\n%s", want, b)
		}
	}
}

// TestHelperProcess is p2pcheck's main when a test runs this test binary as
// p2pcheck (P2PCHECK_TEST_MAIN=1, arguments after "--"); otherwise it does
// nothing.
func TestHelperProcess(t *testing.T) {
	if os.Getenv("P2PCHECK_TEST_MAIN") != "1" {
		return
	}
	for i, a := range os.Args {
		if a == "--" {
			os.Args = append([]string{"p2pcheck"}, os.Args[i+1:]...)
			break
		}
	}
	main()
}

// p2pcheckCommand returns a command that runs p2pcheck with args in a process
// of its own (this test binary, through TestHelperProcess).
func p2pcheckCommand(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestHelperProcess$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "P2PCHECK_TEST_MAIN=1")
	return cmd
}

// TestIntervalSignal: with --interval p2pcheck writes its files, then waits
// for the next period; SIGTERM (and SIGINT) end it with exit 0 right away,
// without waiting out the period. The deadline is only a guard against a hang.
func TestIntervalSignal(t *testing.T) {
	canExecSelf(t)
	root := machineRoot(t, "degraded-link")
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			prom := filepath.Join(t.TempDir(), "p2pcheck.prom")
			cmd := p2pcheckCommand("--root", root, "--quick", "--interval", "24h", "--prometheus", prom)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			guard := time.After(2 * time.Minute)
			for {
				if _, err := os.Stat(prom); err == nil {
					break
				}
				select {
				case err := <-done:
					t.Fatalf("p2pcheck ended before writing %s: %v\n%s", prom, err, stderr.String())
				case <-guard:
					cmd.Process.Kill()
					t.Fatalf("no %s after 2 minutes", prom)
				case <-time.After(20 * time.Millisecond):
				}
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				var ee *exec.ExitError
				if err != nil && !errors.As(err, &ee) {
					t.Fatal(err)
				}
				if code := cmd.ProcessState.ExitCode(); code != exitOK {
					t.Errorf("exit %d after %v, want 0\n%s", code, sig, stderr.String())
				}
			case <-guard:
				cmd.Process.Kill()
				t.Fatalf("p2pcheck still running 2 minutes after %v", sig)
			}
			if !strings.Contains(stdout.String(), "overall: ") {
				t.Errorf("no report on stdout:\n%s", stdout.String())
			}
		})
	}
}
