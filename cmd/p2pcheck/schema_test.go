package main

import (
	"testing"

	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
)

// TestGdrSchema validates "p2pcheck gdr --format json" against
// schema/gdr.v1.json, and checks that the full report, which holds other
// checks, does not pass for it.
func TestGdrSchema(t *testing.T) {
	// gdr.v1.json refers to report.v1.json by its $id.
	validate := testsupport.Schema(t, "../../schema/gdr.v1.json")
	for _, tt := range []struct{ name, flag, arg string }{
		{"h200-2gpu-vm", "--snapshot", h200Snapshot},
		{"degraded-link", "--root", ""},
		{"dgx-h100-nonroot", "--root", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			arg := tt.arg
			if arg == "" {
				arg = machineRoot(t, tt.name)
			}
			code, out, stderr := p2pcheck("gdr", tt.flag, arg, "--format", "json")
			if code == exitUsage || code == exitNoEval {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if err := validate([]byte(out)); err != nil {
				t.Errorf("gdr output does not match schema/gdr.v1.json: %v\n%s", err, out)
			}
			_, out, _ = p2pcheck(tt.flag, arg, "--format", "json")
			if err := validate([]byte(out)); err == nil {
				t.Error("the full report passes for a gdr output")
			}
		})
	}
}
