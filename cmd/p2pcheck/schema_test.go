package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestGdrSchema validates "p2pcheck gdr --format json" against
// schema/gdr.v1.json, and checks that the full report, which holds other
// checks, does not pass for it.
func TestGdrSchema(t *testing.T) {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	// gdr.v1.json refers to report.v1.json by its $id.
	b, err := os.ReadFile("../../schema/report.v1.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("https://github.com/p2pkit/p2pkit/schema/report.v1.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("../../schema/gdr.v1.json")
	if err != nil {
		t.Fatal(err)
	}
	validate := func(s string) error {
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(s)))
		if err != nil {
			return err
		}
		return sch.Validate(inst)
	}
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
			if err := validate(out); err != nil {
				t.Errorf("gdr output does not match schema/gdr.v1.json: %v\n%s", err, out)
			}
			_, out, _ = p2pcheck(tt.flag, arg, "--format", "json")
			if err := validate(out); err == nil {
				t.Error("the full report passes for a gdr output")
			}
		})
	}
}
