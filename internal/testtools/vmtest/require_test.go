package vmtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestSkipOrFailHelper is run by TestSkipOrFail in a child process.
func TestSkipOrFailHelper(t *testing.T) {
	if os.Getenv("VMTEST_HELPER") != "1" {
		t.Skip("helper for TestSkipOrFail")
	}
	SkipOrFail(t, "no %s here", "qemu")
}

func TestSkipOrFail(t *testing.T) {
	for _, tt := range []struct {
		require string
		wantErr bool
		want    string
	}{
		{"", false, "--- SKIP: TestSkipOrFailHelper"},
		{"0", false, "--- SKIP: TestSkipOrFailHelper"},
		{"1", true, "P2PKIT_REQUIRE_HW=1 but: no qemu here"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSkipOrFailHelper$", "-test.v")
		cmd.Env = append(os.Environ(), "VMTEST_HELPER=1", RequireEnv+"="+tt.require)
		out, err := cmd.CombinedOutput()
		if (err != nil) != tt.wantErr || !strings.Contains(string(out), tt.want) {
			t.Errorf("%s=%q: err %v, output:\n%s\nwant %q", RequireEnv, tt.require, err, out, tt.want)
		}
	}
}
