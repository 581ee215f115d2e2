package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNHCScript sources deploy/nhc/p2pcheck.nhc in bash with a stand-in for
// NHC's die and runs check_p2p_static against fixtures with a freshly built
// p2pcheck: a ready node passes, a broken one fails with one line naming the
// check, the PCI address and the fix.
func TestNHCScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds p2pcheck")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	bin := filepath.Join(t.TempDir(), "p2pcheck")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tt := range []struct {
		machine, args string
		want          string // the die message, "" for a pass
	}{
		{"dgx-h100-acs-off", "", ""},
		{"dgx-h100", "", "check_p2p_static: acs_path 0000:17:00.0: ACS redirect on 26 bridge(s)"},
		{"degraded-link", "", ""},
		{"dgx-h100-acs-off", "-t", "check_p2p_static: option -t needs a value"},
	} {
		t.Run(tt.machine+tt.args, func(t *testing.T) {
			root := machineRoot(t, tt.machine)
			script := `die() { echo "DIE $1 $2"; }
source ../../deploy/nhc/p2pcheck.nhc
check_p2p_static -r "$ROOT" ` + tt.args + `
echo "RC $?"`
			cmd := exec.Command(bash, "-c", script)
			cmd.Env = append(os.Environ(), "P2PCHECK="+bin, "ROOT="+root)
			out, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if tt.want == "" {
				if len(lines) != 1 || lines[0] != "RC 0" {
					t.Errorf("output %q, want a pass", lines)
				}
				return
			}
			if len(lines) != 2 || !strings.HasPrefix(lines[0], "DIE 1 "+tt.want) || lines[1] != "RC 1" {
				t.Errorf("output %q, want one die line starting %q and RC 1", lines, tt.want)
			}
		})
	}
}
