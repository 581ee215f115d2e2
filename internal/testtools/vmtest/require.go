package vmtest

import (
	"fmt"
	"os"
	"testing"
)

// RequireEnv is the environment variable that turns "cannot run here" skips into
// failures, on CI runners that are meant to have QEMU, the kernels and the hardware.
const RequireEnv = "P2PKIT_REQUIRE_HW"

// SkipOrFail ends a test that cannot run in this environment: it skips with the
// reason, or fails with it when P2PKIT_REQUIRE_HW=1, so that a missing QEMU or kernel
// on CI cannot make the tier pass silently. Use it for missing prerequisites and for
// checks pending on another package, never for a failed comparison.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf(format, args...)
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s=1 but: %s", RequireEnv, reason)
	}
	t.Skip(reason)
}
