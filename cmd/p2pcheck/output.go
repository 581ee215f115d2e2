package main

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"time"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/internal/atomicfile"
)

// writeFileAtomic writes the output file name with write through package
// atomicfile, the one writer of every output: a target that is not a regular file
// is refused, a failed write leaves the old file, and without force an existing
// file is kept and reported (a usage error).
func writeFileAtomic(name string, force bool, write func(*os.File) error) error {
	err := atomicfile.Write(name, atomicfile.Options{Force: force}, write)
	if errors.Is(err, atomicfile.ErrExists) {
		return usageError("%s exists (use --force to replace it)", name)
	}
	return err
}

// unevaluatedReport is the JSON report of a run that could not evaluate the
// node at all (schema/report.v1.json with "error"): no check ran.
type unevaluatedReport struct {
	SchemaVersion string             `json:"schema_version"`
	ToolVersion   string             `json:"tool_version"`
	Hostname      string             `json:"hostname"`
	Timestamp     time.Time          `json:"timestamp"`
	Overall       check.Status       `json:"overall"`
	ExitCode      int                `json:"exit_code"`
	Requirements  []check.Capability `json:"requirements"`
	Error         string             `json:"error"`
}

// writeUnevaluatedJSON writes r as the report's JSON is written (indented).
func writeUnevaluatedJSON(w io.Writer, r unevaluatedReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
