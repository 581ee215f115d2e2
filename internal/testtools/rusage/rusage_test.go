package rusage

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	Serve()
	os.Exit(m.Run())
}

// TestMeasure runs a shell below the test binary: it sees the environment added,
// not the launcher's own variable, and its output and exit code are counted.
func TestMeasure(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh(1) on this host")
	}
	u, err := Measure([]string{sh, "-c", `echo "$RUSAGE_TEST"; test -z "$` + launchEnv + `" || exit 7; exit 3`}, time.Minute, "RUSAGE_TEST=added")
	if err != nil {
		t.Fatal(err)
	}
	if u.Code != 3 || u.Out != int64(len("added\n")) || u.TimedOut || u.MaxRSS <= 0 || u.Wall <= 0 {
		t.Errorf("Measure = %+v, want exit code 3, 6 bytes out, a peak RSS and a wall time", u)
	}
}
