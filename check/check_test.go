package check_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/p2pkit/p2pkit/check"
)

func TestOverallAndExitCode(t *testing.T) {
	r := func(ss ...check.Status) []check.Result {
		var out []check.Result
		for i, s := range ss {
			out = append(out, check.Result{ID: string(rune('a' + i)), Status: s})
		}
		return out
	}
	for _, tt := range []struct {
		name       string
		results    []check.Result
		overall    check.Status
		first      string
		exit, warn int // exit code, and with --fail-on=warn
	}{
		{"empty", nil, check.Pass, "", 0, 0},
		{"skips only", r(check.Skip, check.Skip), check.Pass, "", 0, 0},
		{"warn", r(check.Pass, check.Warn, check.Skip), check.Warn, "b", 0, 2},
		{"fail beats warn", r(check.Warn, check.Fail), check.Fail, "b", 1, 1},
		{"error", r(check.Warn, check.Error), check.Error, "b", 3, 3},
		{"fail beats error", r(check.Error, check.Fail), check.Fail, "b", 1, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := check.Overall(tt.results, nil)
			first := ""
			if f := check.First(tt.results, nil); f != nil {
				first = f.ID
			}
			got := []any{o, first, check.ExitCode(o, false), check.ExitCode(o, true)}
			if diff := cmp.Diff([]any{tt.overall, tt.first, tt.exit, tt.warn}, got); diff != "" {
				t.Errorf("overall, first, exit codes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunSelection(t *testing.T) {
	f := check.NewFacts(loadMachine(t, "degraded-link"), check.Inputs{})
	res, err := check.Run(f, []string{"gdrdrv", "acs_path"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range res {
		ids = append(ids, r.ID)
	}
	if diff := cmp.Diff([]string{"acs_path", "gdrdrv"}, ids); diff != "" {
		t.Errorf("Run keeps catalogue order (-want +got):\n%s", diff)
	}
	if _, err := check.Run(f, []string{"acs"}); err == nil || !strings.Contains(err.Error(), "acs_path") {
		t.Errorf("Run(unknown) error = %v, want one listing the valid ids", err)
	}
	if got := len(check.IDs()); got != len(check.Catalogue()) || got < 18 {
		t.Errorf("catalogue has %d checks", got)
	}
}
