package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const nhcScript = "../../deploy/nhc/p2pcheck.nhc"

// nhcDie is a stand-in for NHC's die (nhc, function die) that marks the node
// offline the way NHC does, eval $OFFLINE_NODE "'$HOSTNAME'" "'$*'", with an
// OFFLINE_NODE that prints its arguments, and for NHC's log, which prints
// "LOG" and its text. A message that breaks the eval prints no OFFLINE line.
const nhcDie = `HOSTNAME=node1
OFFLINE_NODE=mark_offline
mark_offline() { printf 'OFFLINE %s|%s\n' "$1" "$2"; }
die() { local RET="$1"; shift; eval $OFFLINE_NODE "'$HOSTNAME'" "'$*'"; echo "DIE $RET"; return "$RET"; }
log() { printf 'LOG %s\n' "$*"; }
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
// the check, the PCI address and the fix, cut at a whole word with the whole
// reason in NHC's log.
func TestNHCScript(t *testing.T) {
	bin := p2pcheckScript(t)
	for _, tt := range []struct {
		machine, args string
		want          []string // the lines before "DIE 1", nil for a pass
	}{
		{"dgx-h100-acs-off", "", nil},
		{"dgx-h100", "", []string{
			"LOG check_p2p_static: whole reason: check_p2p_static: acs_path 0000:17:00.0: ACS redirect on 26 bridge(s) between peers: their traffic is forced through the root complex -> kernel command line: \"pci=disable_acs_redir=0000:15:01.0/0.0/0.0;",
			"OFFLINE node1|check_p2p_static: acs_path 0000:17:00.0: ACS redirect on 26 bridge(s) between peers: their traffic is forced through the root complex -> kernel command line: …",
		}},
		{"degraded-link", "-e gpus=2", nil}, // gdrdrv is missing: it blocks only gdrcopy
		// Two GPUs, no RDMA NIC, and nothing says so: gdr has nothing to judge.
		{"degraded-link", "", []string{"LOG check_p2p_static: whole reason: check_p2p_static: p2pcheck could not evaluate this node: inventory gdr: nothing to judge:", "OFFLINE node1|check_p2p_static: p2pcheck could not evaluate this node: inventory gdr: nothing to judge: gdr needs a GPU and an RDMA NIC, found 2 GPU, 0 RDMA NIC (without --expect, whether the node should have them is unknown) -> say what the node is built with, --expect gpus=N,rdma-nics=N,nvme=N …"}},
		{"dgx-h100-acs-off", "-e gpus=9,rdma-nics=8", []string{"LOG check_p2p_static: whole reason: check_p2p_static: inventory GPU: devices missing:", "OFFLINE node1|check_p2p_static: inventory GPU: devices missing: found 8 of 9 GPU (--expect gpus=9,rdma-nics=8) -> find the missing devices: lspci -nn; dmesg | grep -i -e \"fallen off the bus\" -e \"link down\" -e AER; reseat, enable the slot in the BIOS or replace what the firmware no longer enumerates; an RDMA NIC …"}},
		{"degraded-link", "-R gdrcopy -e gpus=2", []string{
			"LOG check_p2p_static: whole reason: check_p2p_static: gdrdrv: the gdrdrv kernel module is not loaded (not in /proc/modules) -> load gdrdrv with what installed it, which also creates /dev/gdrdrv: sudo systemctl start gdrdrv (Debian/Ubuntu gdrdrv-dkms), sudo systemctl start gdrcopy (RHEL RPM), sudo modprobe gdrdrv (SUSE RPM: its modprobe rule makes the node), or sudo ./insmod.sh in a GDRCopy source tree",
			"OFFLINE node1|check_p2p_static: gdrdrv: the gdrdrv kernel module is not loaded (not in /proc/modules) -> load gdrdrv with what installed it, which also creates /dev/gdrdrv: sudo systemctl start gdrdrv (Debian/Ubuntu gdrdrv-dkms), sudo systemctl start gdrcopy (RHEL RPM), sudo modprobe gdrdrv (SUSE RPM: its …",
		}},
		{"dgx-h100-nonroot", "", []string{
			"LOG check_p2p_static: whole reason: check_p2p_static: p2pcheck could not evaluate this node: acs_path 0000:1a:00.0<->0000:1b:00.0: ACS unknown on the paths of 24 of 108 pairs: extended config space is unreadable without root -> run p2pcheck as root (CAP_SYS_ADMIN) to read ACS Control past config space offset 64 (/sys/bus/pci/devices/<bdf>/config)",
			"OFFLINE node1|check_p2p_static: p2pcheck could not evaluate this node: acs_path 0000:1a:00.0<->0000:1b:00.0: ACS unknown on the paths of 24 of 108 pairs: extended config space is unreadable without root -> run p2pcheck as root (CAP_SYS_ADMIN) to read ACS Control past config space offset 64 …",
		}},
		{"dgx-h100-acs-off", "-t", []string{"OFFLINE node1|check_p2p_static: option -t needs a value"}},
		{"dgx-h100-acs-off", "-t 0", []string{"OFFLINE node1|check_p2p_static: -t needs a whole number of seconds, not 0"}},
	} {
		t.Run(tt.machine+tt.args, func(t *testing.T) {
			root := machineRoot(t, tt.machine)
			lines := nhc(t, []string{"P2PCHECK=" + bin, "ROOT=" + root}, `check_p2p_static -r "$ROOT" `+tt.args+"\necho \"RC $?\"")
			want := []string{"RC 0"}
			if tt.want != nil {
				want = append(slices.Clone(tt.want), "DIE 1", "RC 1")
			}
			// The whole reason is long: compare its start.
			if len(lines) > 0 && len(want) > 0 && strings.HasPrefix(want[0], "LOG ") && strings.HasPrefix(lines[0], want[0]) {
				lines[0] = want[0]
			}
			if diff := cmp.Diff(want, lines); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			for _, l := range lines {
				if r := []rune(l); strings.HasPrefix(l, "OFFLINE ") && len(r) > len("OFFLINE node1|")+300+2 {
					t.Errorf("reason of %d characters, want at most 300 and \" …\": %q", len(r)-len("OFFLINE node1|"), l)
				}
			}
		})
	}
}

// TestNHCCut: a reason too long for Slurm is cut after its last whole word
// that fits, never inside one, and a glob character in it stays literal.
func TestNHCCut(t *testing.T) {
	for _, tt := range []struct {
		max, in, want string
	}{
		{"30", "short", "short"},
		{"30", "acs_path 0000:17:00.0: ACS redirect on 26 bridges", "acs_path 0000:17:00.0: ACS …"},
		{"30", "acs_path * [a-z] redirect on 26 bridges", "acs_path * [a-z] redirect on …"},
		{"30", "pci=disable_acs_redir=0000:15:01.0/0.0/0.0;0000:15:01.0/0.0/1.0 next", "pci=disable_acs_redir=0000:15:01.0/0.0/0.0;0000:15:01.0/0.0/1.0 …"},
		{"bogus", strings.Repeat("word ", 100), strings.Repeat("word ", 58) + "word …"},
	} {
		t.Run(tt.in, func(t *testing.T) {
			lines := nhc(t, []string{"P2PCHECK_MSG_MAX=" + tt.max, "IN=" + tt.in}, `p2p_cut "$IN"; echo`)
			if diff := cmp.Diff([]string{tt.want}, lines); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestNHCFind: p2pcheck is found where the README installs it although NHC
// resets PATH, and a node without it is not drained unless the site asks.
func TestNHCFind(t *testing.T) {
	bin := p2pcheckScript(t)
	root := machineRoot(t, "dgx-h100-acs-off")
	gobin := filepath.Join(t.TempDir(), "go", "bin")
	if err := os.MkdirAll(gobin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(gobin, "p2pcheck")); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	nhcPath := "PATH=/sbin:/usr/sbin:/bin:/usr/bin"
	for _, tt := range []struct {
		name string
		env  []string
		want []string
	}{
		{"in ~/go/bin", []string{nhcPath, "HOME=" + filepath.Dir(filepath.Dir(gobin)), "P2PCHECK_SEARCH="}, []string{"RC 0"}},
		{"in the search list", []string{nhcPath, "P2PCHECK_SEARCH=" + empty + ":" + gobin}, []string{"RC 0"}},
		{"missing", []string{nhcPath, "P2PCHECK_SEARCH=" + empty}, []string{
			"LOG check_p2p_static: p2pcheck not found: p2pcheck on PATH (/sbin:/usr/sbin:/bin:/usr/bin) or in " + empty +
				"; not draining (set P2PCHECK to its path, or P2PCHECK_MISSING=drain to drain)",
			"RC 0"}},
		{"missing, drain", []string{nhcPath, "P2PCHECK_SEARCH=" + empty, "P2PCHECK_MISSING=drain"}, []string{
			"OFFLINE node1|check_p2p_static: p2pcheck not found: p2pcheck on PATH (/sbin:/usr/sbin:/bin:/usr/bin) or in " + empty + " (set P2PCHECK)",
			"DIE 1", "RC 1"}},
		{"P2PCHECK wrong", []string{"P2PCHECK=" + filepath.Join(empty, "p2pcheck")}, []string{
			"LOG check_p2p_static: p2pcheck not found: " + filepath.Join(empty, "p2pcheck") +
				"; not draining (set P2PCHECK to its path, or P2PCHECK_MISSING=drain to drain)",
			"RC 0"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := append([]string{"ROOT=" + root}, tt.env...)
			// bash and timeout must still be found: PATH is NHC's.
			lines := nhc(t, env, `check_p2p_static -r "$ROOT"
echo "RC $?"`)
			if diff := cmp.Diff(tt.want, lines); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
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
			"could not evaluate, reason on stdout",
			`echo "overall: UNKNOWN (exit 3)"
echo "fix first: acs_path 0000:1a:00.0: ACS unknown -> run p2pcheck as root"
exit 3`,
			`OFFLINE node1|check_p2p_static: p2pcheck could not evaluate this node: acs_path 0000:1a:00.0: ACS unknown -> run p2pcheck as root`,
		},
		{
			"could not evaluate, no reason",
			`exit 3`,
			`OFFLINE node1|check_p2p_static: p2pcheck could not evaluate this node: no reason given`,
		},
		{
			"usage",
			`echo "p2pcheck: unknown flag: --expect" >&2; exit 64`,
			`OFFLINE node1|check_p2p_static: p2pcheck exited 64: unknown flag: --expect`,
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
