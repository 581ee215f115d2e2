package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
)

// TestUsageErrors: each usage error exits 64 with one message that names the
// program once ("p2pcheck: ...", never "p2pcheck: p2pcheck: ...").
func TestUsageErrors(t *testing.T) {
	root := machineRoot(t, "degraded-link")
	missing := filepath.Join(t.TempDir(), "missing.ids")
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown command", []string{"bogus"}, `p2pcheck: unexpected argument "bogus"`},
		{"argument to topo", []string{"--root", root, "topo", "extra"}, `p2pcheck: topo: unexpected argument "extra"`},
		{"argument to the report", []string{"--root", root, "report", "extra"}, `p2pcheck: report: unexpected argument "extra"`},
		{"unknown shell", []string{"completion", "bogus"}, `p2pcheck: completion: unknown shell "bogus" (one of bash, fish, powershell, zsh)`},
		{"argument to a shell", []string{"completion", "bash", "extra"}, `p2pcheck: unknown command "extra" for "p2pcheck completion bash"`},
		{"missing pci.ids", []string{"--root", root, "--pci-ids", missing, "topo"}, "p2pcheck: --pci-ids: " + missing + " does not exist"},
		{"missing pci.ids, report", []string{"--root", root, "--pci-ids", missing}, "p2pcheck: --pci-ids: " + missing + " does not exist"},
		{"bad format", []string{"--root", root, "--format", "yaml"}, `p2pcheck: --format must be text or json, not "yaml"`},
		{"one device", []string{"--root", root, "pair", "1"}, "p2pcheck: pair: want two devices"},
		{"man without a directory", []string{"man"}, "p2pcheck: man: want one directory"},
		{"unknown flag", []string{"--bogus"}, "p2pcheck: unknown flag: --bogus"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := p2pcheck(tt.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d (usage)", code, exitUsage)
			}
			if !strings.HasPrefix(stderr, tt.want) {
				t.Errorf("stderr %q, want it to start with %q", stderr, tt.want)
			}
			if strings.Contains(stderr, "p2pcheck: p2pcheck") {
				t.Errorf("stderr %q names the program twice", stderr)
			}
			if tt.name != "unknown shell" && stdout != "" {
				t.Errorf("stdout %q on a usage error", stdout)
			}
		})
	}
}

// TestCompletionCommand: a known shell prints its script, no shell prints the
// help; an unknown one is a usage error (TestUsageErrors).
func TestCompletionCommand(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		code, out, stderr := p2pcheck("completion", sh)
		if code != exitOK || !strings.Contains(out, "p2pcheck") || stderr != "" {
			t.Errorf("completion %s: exit %d, %d bytes, stderr %q", sh, code, len(out), stderr)
		}
	}
	code, out, _ := p2pcheck("completion")
	if code != exitOK || !strings.Contains(out, "Available Commands:") {
		t.Errorf("completion: exit %d, %q; want the help", code, out)
	}
}

// TestUseColor: colour only on a terminal whose TERM can show it, and never
// with --no-color or NO_COLOR.
func TestUseColor(t *testing.T) {
	for _, tt := range []struct {
		name     string
		noColor  bool
		env      map[string]string
		terminal bool
		want     bool
	}{
		{"terminal", false, map[string]string{"TERM": "xterm-256color"}, true, true},
		{"not a terminal", false, map[string]string{"TERM": "xterm"}, false, false},
		{"--no-color", true, map[string]string{"TERM": "xterm"}, true, false},
		{"NO_COLOR", false, map[string]string{"TERM": "xterm", "NO_COLOR": "1"}, true, false},
		{"NO_COLOR empty", false, map[string]string{"TERM": "xterm", "NO_COLOR": ""}, true, true},
		{"TERM=dumb", false, map[string]string{"TERM": "dumb"}, true, false},
		{"TERM unset", false, map[string]string{}, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string { return tt.env[k] }
			if got := useColor(tt.noColor, getenv, tt.terminal); got != tt.want {
				t.Errorf("useColor = %v, want %v", got, tt.want)
			}
		})
	}
	// A buffer is not a terminal, whatever TERM says.
	t.Setenv("TERM", "xterm")
	if isTerminal(&bytes.Buffer{}) {
		t.Error("a buffer is a terminal")
	}
}

// TestJSONOnNoEval: with --format json, a run that cannot evaluate the node
// still prints a report (overall error, exit_code 3, the error) that follows
// schema/report.v1.json; text prints nothing on stdout; a usage error prints
// no JSON.
func TestJSONOnNoEval(t *testing.T) {
	validate := testsupport.Schema(t, "../../schema/report.v1.json")
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.tar.gz")
	notGzip := filepath.Join(dir, "bad.tar.gz")
	if err := os.WriteFile(notGzip, []byte("not a snapshot"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		args []string
		want string // in the error
	}{
		{"missing snapshot", []string{"--snapshot", missing}, missing},
		{"unreadable snapshot", []string{"--snapshot", notGzip}, notGzip},
		{"no sysfs", []string{"--root", dir, "--quick"}, "sys"},
		{"report command, required", []string{"report", "--snapshot", missing, "--require", "gdrcopy"}, missing},
		{"gdr", []string{"gdr", "--snapshot", missing}, missing},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, stderr := p2pcheck(append(tt.args, "--format", "json")...)
			if code != exitNoEval {
				t.Fatalf("exit %d, want 3\n%s", code, stderr)
			}
			if err := validate([]byte(out)); err != nil {
				t.Fatalf("stdout does not follow schema/report.v1.json: %v\n%s", err, out)
			}
			var r struct {
				Overall      string
				ExitCode     int `json:"exit_code"`
				Error        string
				Requirements []string
			}
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatal(err)
			}
			if r.Overall != "error" || r.ExitCode != 3 || !strings.Contains(r.Error, tt.want) || !strings.Contains(stderr, r.Error) {
				t.Errorf("report %+v, stderr %q; want overall error, exit_code 3 and the error naming %s", r, stderr, tt.want)
			}
			if slices.Contains(tt.args, "gdrcopy") && !slices.Equal(r.Requirements, []string{"gdrcopy"}) {
				t.Errorf("requirements %q, want the ones asked for", r.Requirements)
			}
			code, out, _ = p2pcheck(tt.args...)
			if code != exitNoEval || out != "" {
				t.Errorf("text: exit %d, stdout %q; want 3 and nothing", code, out)
			}
		})
	}
	// An error report with checks, or claiming another status, is not one.
	for _, bad := range []string{
		`{"schema_version":"1","tool_version":"x","hostname":"h","timestamp":"2026-01-01T00:00:00Z","overall":"pass","exit_code":0,"requirements":["p2p"],"error":"e"}`,
		`{"schema_version":"1","tool_version":"x","hostname":"h","timestamp":"2026-01-01T00:00:00Z","overall":"error","exit_code":3,"requirements":["p2p"],"error":"e","checks":[]}`,
		`{"schema_version":"1","tool_version":"x","hostname":"h","timestamp":"2026-01-01T00:00:00Z","overall":"error","exit_code":3,"requirements":["p2p"]}`,
	} {
		if validate([]byte(bad)) == nil {
			t.Errorf("schema accepts %s", bad)
		}
	}
	if code, out, _ := p2pcheck("--snapshot", missing, "--format", "json", "--fail-on", "bogus"); code != exitUsage || out != "" {
		t.Errorf("usage error: exit %d, stdout %q; want 64 and no JSON", code, out)
	}
}

// TestQuiet: --quiet prints the verdict only (text) or the report (JSON), and
// a second run prints nothing unless a status changed, as each period of
// --interval does.
func TestQuiet(t *testing.T) {
	root := machineRoot(t, "dgx-h100-acs-off")
	code, full, _ := p2pcheck("--root", root, "--quick", "--no-color")
	code2, quiet, stderr := p2pcheck("--root", root, "--quick", "--quiet")
	if code != code2 || stderr != "" {
		t.Fatalf("exit %d with --quiet, %d without; stderr %q", code2, code, stderr)
	}
	i := strings.LastIndex(full, "\noverall:")
	if i < 0 || quiet != full[i+1:] || !strings.HasPrefix(quiet, "overall: ") {
		t.Errorf("--quiet printed %q, want the verdict lines of the report:\n%s", quiet, full)
	}
	code, out, _ := p2pcheck("--root", root, "--quick", "-q", "--format", "json")
	if code != code2 || !json.Valid([]byte(out)) {
		t.Errorf("--quiet --format json: exit %d, %q; want the JSON report", code, out)
	}

	// Runs in a row, as --interval makes them.
	var stdout, stderrb bytes.Buffer
	o := &globalOptions{root: root, format: "text", noColor: true, stdout: &stdout, stderr: &stderrb}
	ro := &reportOptions{global: o, quiet: true, quick: true, failOn: "fail", aerThreshold: 1}
	runs := func() string {
		t.Helper()
		stdout.Reset()
		o.reads = hostfs.NewMeter(hostfs.DefaultBudget.RunBytes)
		ro.report(nil)
		return stdout.String()
	}
	if got := runs(); got != quiet {
		t.Errorf("first run printed %q, want %q", got, quiet)
	}
	if got := runs(); got != "" {
		t.Errorf("second run, nothing changed, printed %q", got)
	}
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "nccl.conf"), []byte("NCCL_P2P_DISABLE=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := runs(); !strings.HasPrefix(got, "overall: FAIL") || !strings.Contains(got, "nccl_env") {
		t.Errorf("third run, nccl_env now fails, printed %q", got)
	}
	// A run that cannot read the machine has no verdict: the next one is news.
	o.root = filepath.Join(t.TempDir(), "gone")
	if got := runs(); got != "" {
		t.Errorf("run without a machine printed %q on stdout", got)
	}
	o.root = root
	if got := runs(); !strings.HasPrefix(got, "overall: FAIL") {
		t.Errorf("run after one without a verdict printed %q, want the verdict again", got)
	}
	stderrb.Reset()
	if stderrb.Len() != 0 {
		t.Errorf("stderr %q", stderrb.String())
	}
}

// TestCompletionValues: the shell completion offers each enumerated flag's
// values and the device addresses of the machine read (--root, --snapshot).
func TestCompletionValues(t *testing.T) {
	root := machineRoot(t, "degraded-link")
	complete := func(args ...string) []string {
		t.Helper()
		code, out, stderr := p2pcheck(append([]string{cobra.ShellCompRequestCmd}, args...)...)
		if code != exitOK {
			t.Fatalf("__complete %q: exit %d: %s", args, code, stderr)
		}
		var got []string
		for line := range strings.Lines(out) {
			line = strings.TrimSuffix(line, "\n")
			if strings.HasPrefix(line, ":") {
				break
			}
			name, _, _ := strings.Cut(line, "\t")
			got = append(got, name)
		}
		return got
	}
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"--format", ""}, []string{"text", "json"}},
		{[]string{"topo", "--format", ""}, []string{"text", "json", "dot"}},
		{[]string{"--fail-on", ""}, []string{"fail", "warn"}},
		{[]string{"report", "--fail-on", "w"}, []string{"fail", "warn"}}, // the shell filters by prefix
		{[]string{"diff", "--fail-on", ""}, []string{"fail", "warn"}},
		{[]string{"diff", "--format", ""}, []string{"text", "json", "dot"}},
		{[]string{"--require", "p2p,"}, []string{"p2p,gdr", "p2p,gdrcopy", "p2p,nvme-p2p"}},
		{[]string{"--root", root, "pair", "0000:0"}, []string{"0000:00:00.0", "0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:02:01.0", "0000:03:00.0", "0000:04:00.0"}},
		{[]string{"--root", root, "pair", "0000:00:00.0", "0"}, []string{"0000:00:00.0", "0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:02:01.0", "0000:03:00.0", "0000:04:00.0"}},
		{[]string{"--root", root, "pair", "01"}, []string{"01:00.0"}},
		{[]string{"--root", root, "pair", "a", "b", ""}, nil},
		{[]string{"--root", filepath.Join(t.TempDir(), "none"), "pair", ""}, nil},
	} {
		if diff := cmp.Diff(tt.want, complete(tt.args...)); diff != "" {
			t.Errorf("__complete %q (-want +got):\n%s", tt.args, diff)
		}
	}
	if got := complete("--check", ""); !slices.Contains(got, "acs_path") || !slices.Contains(got, "nccl_env") {
		t.Errorf("--check completes %q, want the check IDs", got)
	}
	if got := complete("--snapshot", h200Snapshot, "pair", ""); len(got) == 0 || !slices.Contains(got, "0000:00:00.0") {
		t.Errorf("pair on the snapshot completes %q", got)
	}
}

// TestManPages: "p2pcheck man DIR" writes one page per command a user runs,
// each a man page of that command, dated SOURCE_DATE_EPOCH, that groff reads
// without a warning and sets with the options and examples as typed.
func TestManPages(t *testing.T) {
	groff, err := exec.LookPath("groff")
	if err != nil && os.Getenv("CI") == "true" {
		t.Fatalf("groff is required in CI: %v", err)
	}
	dir := t.TempDir()
	t.Setenv("SOURCE_DATE_EPOCH", "1764547200") // 2025-12-01
	if code, out, stderr := p2pcheck("man", dir); code != exitOK || out != "" || stderr != "" {
		t.Fatalf("man: exit %d, %q, %q", code, out, stderr)
	}
	var want []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		want = append(want, manPageName(c))
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() {
				walk(s)
			}
		}
	}
	walk(newRootCommand(&bytes.Buffer{}, &bytes.Buffer{}))
	slices.Sort(want)
	for _, c := range []string{"p2pcheck.1", "p2pcheck-topo.1", "p2pcheck-pair.1", "p2pcheck-report.1", "p2pcheck-completion-bash.1"} {
		if !slices.Contains(want, c) {
			t.Errorf("no command for %s", c)
		}
	}
	if diff := cmp.Diff(want, dirNames(t, dir)); diff != "" {
		t.Errorf("man pages (-want +got):\n%s", diff)
	}
	for _, name := range want {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		cmdName := strings.ReplaceAll(strings.TrimSuffix(name, ".1"), "-", `\-`)
		title := strings.ToUpper(cmdName)
		if !bytes.Contains(b, []byte(`.TH "`+title+`" "1" "Dec 2025"`)) || !bytes.Contains(b, []byte(".SH NAME\n"+cmdName+` \- `)) {
			t.Errorf("%s is not the man page of %s:\n%.300s", name, cmdName, b)
		}
		// groff reads the page without a warning (-ww: all of them).
		if groff != "" {
			out, err := exec.Command(groff, "-man", "-ww", "-z", filepath.Join(dir, name)).CombinedOutput()
			if err != nil || len(out) > 0 {
				t.Errorf("groff -man -ww -z %s: %v\n%s", name, err, out)
			}
		}
	}
	if groff != "" {
		out, err := exec.Command(groff, "-man", "-Tascii", "-P-cbou", filepath.Join(dir, "p2pcheck-snapshot.1")).Output()
		for _, want := range []string{"p2pcheck-snapshot - Capture", "p2pcheck snapshot -o FILE.tar.gz [flags]", "-o, --output=FILE", "--root=DIR", `(default "/")`, "p2pcheck snapshot -o $(hostname)-p2p.tar.gz", "p2pcheck(1)"} {
			if err != nil || !bytes.Contains(out, []byte(want)) {
				t.Errorf("p2pcheck-snapshot.1 as groff sets it has no %q (%v):\n%s", want, err, out)
			}
		}
	}
	// Written again, the pages are replaced.
	if code, _, stderr := p2pcheck("man", dir); code != exitOK {
		t.Errorf("man again: exit %d: %s", code, stderr)
	}
	if code, _, _ := p2pcheck("man", filepath.Join(dir, "missing")); code != exitNoEval {
		t.Errorf("man into a missing directory: exit %d, want 3", code)
	}
}

// TestProbeProgress: --progress reports the probe on stderr, never on stdout
// (the JSON stays whole); without it, and with stderr not a terminal, nothing.
func TestProbeProgress(t *testing.T) {
	root := machineRoot(t, "degraded-link")
	_, out, stderr := p2pcheck("--root", root, "--probe", "--progress", "--format", "json")
	if !json.Valid([]byte(out)) || !strings.Contains(stderr, "p2pcheck: probe: not run") {
		t.Errorf("--progress: stdout valid JSON %v, stderr %q", json.Valid([]byte(out)), stderr)
	}
	_, out, stderr = p2pcheck("--root", root, "--probe", "--format", "json")
	if !json.Valid([]byte(out)) || strings.Contains(stderr, "probe:") {
		t.Errorf("without --progress: stdout valid JSON %v, stderr %q", json.Valid([]byte(out)), stderr)
	}
}

// TestREADMEGoInstall: the README's go install commands set CGO_CFLAGS as the
// Makefile does, so that building go-nvml's cgo code prints no deprecation
// warnings. Under CI=true the two commands are built with that setting (with a
// define added that only makes the go command compile the C code again instead
// of taking it from its cache) and must print nothing.
func TestREADMEGoInstall(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	var cflags string
	for line := range strings.Lines(string(mk)) {
		if v, ok := strings.CutPrefix(line, "CGO_CFLAGS ?= "); ok {
			cflags = strings.TrimSpace(v)
		}
	}
	if cflags == "" {
		t.Fatal("the Makefile sets no CGO_CFLAGS")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for line := range strings.Lines(string(readme)) {
		if !strings.Contains(line, "go install ") {
			continue
		}
		fields := strings.Fields(line)
		i := slices.Index(fields, "install")
		if i < 2 || fields[i-1] != "go" {
			continue // prose
		}
		if want := []string{"CGO_CFLAGS=" + cflags}; !slices.Equal(fields[:i-1], want) {
			t.Errorf("README: %q sets %q before go install, want %q (the Makefile's)", strings.TrimSpace(line), fields[:i-1], want)
		}
		pkg, _, _ := strings.Cut(fields[i+1], "@")
		pkgs = append(pkgs, "./"+strings.TrimPrefix(pkg, "github.com/p2pkit/p2pkit/"))
	}
	if diff := cmp.Diff([]string{"./cmd/p2pcheck", "./cmd/gdrbench"}, pkgs); diff != "" {
		t.Fatalf("README's go install commands (-want +got):\n%s", diff)
	}
	if os.Getenv("CI") != "true" {
		t.Skip("building with cgo takes a minute: set CI=true to build the README's commands")
	}
	if _, err := exec.LookPath("cc"); err != nil {
		t.Fatalf("no C compiler, so no cgo build to check: %v", err)
	}
	// Two main packages: go build compiles both and keeps nothing.
	cmd := exec.Command("go", append([]string{"build"}, pkgs...)...)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1", fmt.Sprintf("CGO_CFLAGS=%s -DP2PKIT_README_CHECK=%d", cflags, os.Getpid()))
	out, err := cmd.CombinedOutput()
	if err != nil || len(out) != 0 {
		t.Errorf("go build %s with the README's CGO_CFLAGS: %v\n%s", pkgs, err, out)
	}
}
