package buildinfo

import (
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLine(t *testing.T) {
	defer func(v, c string) { version, commit = v, c }(version, commit)
	version, commit = "v0.3.0", "0123456789abcdef0123456789abcdef01234567"
	for _, tt := range []struct {
		features []Feature
		want     string
	}{
		{nil, "tool v0.3.0 commit=0123456789ab"},
		{[]Feature{{"NVML", true}, {"CUDA", false}}, "tool v0.3.0 commit=0123456789ab nvml=true cuda=false"},
	} {
		want := tt.want + " go=" + runtime.Version() + " platform=" + runtime.GOOS + "/" + runtime.GOARCH
		if diff := cmp.Diff(want, Line("tool", tt.features...)); diff != "" {
			t.Errorf("Line(%v) (-want +got):\n%s", tt.features, diff)
		}
	}
}

// TestUnstamped: without the linker's values the version and commit come from
// the go command's build information, never empty.
func TestUnstamped(t *testing.T) {
	defer func(v, c string) { version, commit = v, c }(version, commit)
	version, commit = "", ""
	if Version() == "" || Commit() == "" {
		t.Errorf("Version() = %q, Commit() = %q; want both non-empty", Version(), Commit())
	}
}
