package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const nhcScript = "../../deploy/nhc/p2pcheck.nhc"

// nhcDie is a stand-in for NHC's die (nhc, function die) that marks the node
// offline the way NHC does, eval $OFFLINE_NODE "'$HOSTNAME'" "'$*'", with an
// OFFLINE_NODE that prints its arguments. A message that breaks the eval
// prints no OFFLINE line.
const nhcDie = `HOSTNAME=node1
OFFLINE_NODE=mark_offline
mark_offline() { printf 'OFFLINE %s|%s\n' "$1" "$2"; }
die() { local RET="$1"; shift; eval $OFFLINE_NODE "'$HOSTNAME'" "'$*'"; echo "DIE $RET"; return "$RET"; }
`

// nhc sources the NHC checks in bash with the stand-in die, runs script and
// returns its output lines.
func nhc(t *testing.T, env []string, script string) []string {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	if _, err := exec.LookPath("timeout"); err != nil {
		t.Skip("no timeout(1)")
	}
	cmd := exec.Command(bash, "-c", nhcDie+"source "+nhcScript+"\n"+script)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// canExecSelf skips the test where this test binary cannot start itself as
// p2pcheck (under qemu-user without binfmt_misc).
func canExecSelf(t *testing.T) {
	t.Helper()
	if err := exec.Command(os.Args[0], "-test.run=^$").Run(); err != nil {
		t.Skipf("this test binary cannot run itself as p2pcheck here: %v", err)
	}
}

// p2pcheckScript writes an executable that runs this test binary as p2pcheck.
func p2pcheckScript(t *testing.T) string {
	t.Helper()
	canExecSelf(t)
	p := filepath.Join(t.TempDir(), "p2pcheck")
	script := "#!/bin/sh\nP2PCHECK_TEST_MAIN=1 exec '" + os.Args[0] + "' -test.run='^TestHelperProcess$' -- \"$@\"\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNHCScript runs check_p2p_static against fixtures with p2pcheck itself:
// a ready node passes, a broken one is marked offline with one line naming
// the check, the PCI address and the fix.
func TestNHCScript(t *testing.T) {
	bin := p2pcheckScript(t)
	for _, tt := range []struct {
		machine, args string
		want          string // the OFFLINE line's start, "" for a pass
	}{
		{"dgx-h100-acs-off", "", ""},
		{"dgx-h100", "", "OFFLINE node1|check_p2p_static: acs_path 0000:17:00.0: ACS redirect on 26 bridge(s)"},
		{"degraded-link", "", ""}, // gdrdrv is missing: it blocks only gdrcopy
		{"degraded-link", "-R gdrcopy", "OFFLINE node1|check_p2p_static: gdrdrv: the gdrdrv kernel module is not loaded"},
		{"dgx-h100-acs-off", "-t", "OFFLINE node1|check_p2p_static: option -t needs a value"},
		{"dgx-h100-acs-off", "-t 0", "OFFLINE node1|check_p2p_static: -t needs a whole number of seconds, not 0"},
	} {
		t.Run(tt.machine+tt.args, func(t *testing.T) {
			root := machineRoot(t, tt.machine)
			lines := nhc(t, []string{"P2PCHECK=" + bin, "ROOT=" + root}, `check_p2p_static -r "$ROOT" `+tt.args+"\necho \"RC $?\"")
			if tt.want == "" {
				if diff := cmp.Diff([]string{"RC 0"}, lines); diff != "" {
					t.Errorf("want a pass (-want +got):\n%s", diff)
				}
				return
			}
			if len(lines) != 3 || !strings.HasPrefix(lines[0], tt.want) || lines[1] != "DIE 1" || lines[2] != "RC 1" {
				t.Errorf("output %q, want an OFFLINE line starting %q, DIE 1 and RC 1", lines, tt.want)
			}
		})
	}
}

// TestNHCDieSafe: fix texts with apostrophes and quoted commands, from a fake
// p2pcheck, still mark the node offline through NHC's eval, with no single
// quote left in the note; so do p2pcheck's own errors.
func TestNHCDieSafe(t *testing.T) {
	dir := t.TempDir()
	fake := func(name, script string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tt := range []struct {
		name, script, want string
	}{
		{
			"apostrophes",
			`echo "overall: fail (exit 1)"
echo "fix first: gdrdrv: gdrdrv is not loaded -> from GDRCopy's source tree run 'sudo ./insmod.sh'; see 'dmesg | grep gdrdrv'; set 'memlock unlimited'"
exit 1`,
			`OFFLINE node1|check_p2p_static: gdrdrv: gdrdrv is not loaded -> from GDRCopys source tree run "sudo ./insmod.sh"; see "dmesg | grep gdrdrv"; set "memlock unlimited"`,
		},
		{
			"could not evaluate",
			`echo "p2pcheck: reading root /x: can't open 'sys': permission denied" >&2; exit 3`,
			`OFFLINE node1|check_p2p_static: p2pcheck could not evaluate this node: reading root /x: cant open "sys": permission denied`,
		},
		{
			"control characters and a lone quote",
			"printf 'fix first: a\\tb \\047 c\\033[0m\\n'; exit 2",
			`OFFLINE node1|check_p2p_static: a b " c [0m`,
		},
		{
			"panic",
			`echo "p2pcheck: internal error: it's broken" >&2; exit 3`,
			`OFFLINE node1|check_p2p_static: p2pcheck could not evaluate this node: internal error: its broken`,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lines := nhc(t, []string{"P2PCHECK=" + fake(strings.ReplaceAll(tt.name, " ", "-"), tt.script)}, "check_p2p_static\necho \"RC $?\"")
			if diff := cmp.Diff([]string{tt.want, "DIE 1", "RC 1"}, lines); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestNHCTimeout: the checks' default timeouts fit inside NHC's $TIMEOUT, and
// a p2pcheck that hangs is ended on timeout: it ran in NHC's process group
// (which NHC's watchdog signals) and is gone when the check returns.
func TestNHCTimeout(t *testing.T) {
	for _, tt := range []struct {
		env  []string
		want []string
	}{
		{nil, []string{"static 10", "probe 25"}},
		{[]string{"TIMEOUT=30"}, []string{"static 10", "probe 25"}},
		{[]string{"TIMEOUT=60"}, []string{"static 10", "probe 55"}},
		{[]string{"TIMEOUT=12"}, []string{"static 7", "probe 7"}},
		{[]string{"TIMEOUT=0"}, []string{"static 10", "probe 120"}},
	} {
		t.Run(strings.Join(tt.env, " "), func(t *testing.T) {
			// A stand-in p2p_run prints the timeout each check picks.
			lines := nhc(t, tt.env, `p2p_run() { echo "${1#check_p2p_} $2"; }
check_p2p_static
check_p2p_probe`)
			if diff := cmp.Diff(tt.want, lines); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}

	dir := t.TempDir()
	hang := filepath.Join(dir, "p2pcheck")
	pids := filepath.Join(dir, "pids")
	if err := os.WriteFile(hang, []byte("#!/bin/sh\necho \"$$ $(ps -o pgid= $$)\" >"+pids+"\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("ps"); err != nil {
		t.Skip("no ps")
	}
	lines := nhc(t, []string{"P2PCHECK=" + hang}, `check_p2p_static -t 1
echo "RC $?"
read pid pgid <`+pids+`
echo "same group $(( pgid == $(ps -o pgid= $$) ))"
kill -0 "$pid" 2>/dev/null && echo "still running" || echo "gone"`)
	want := []string{"OFFLINE node1|check_p2p_static: p2pcheck timed out after 1s", "DIE 1", "RC 1", "same group 1", "gone"}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("hanging p2pcheck (-want +got):\n%s", diff)
	}
}
