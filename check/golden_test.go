package check_test

import (
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
)

// TestGoldenReports runs the whole catalogue on every machine and compares the
// JSON report with testdata/reports/<machine>.json.
func TestGoldenReports(t *testing.T) {
	for _, name := range machines() {
		t.Run(name, func(t *testing.T) {
			testsupport.Golden(t, "testdata/reports/"+name+".json", marshal(t, report(t, name)))
		})
	}
}

// TestSchema validates the JSON report of every machine against the committed
// schema, and checks that the schema rejects what it must.
func TestSchema(t *testing.T) {
	validate := testsupport.Schema(t, "../schema/report.v1.json")
	for _, name := range machines() {
		t.Run(name, func(t *testing.T) {
			if err := validate(marshal(t, report(t, name))); err != nil {
				t.Errorf("report does not match schema/report.v1.json: %v", err)
			}
		})
	}
	t.Run("rejects", func(t *testing.T) {
		good := string(marshal(t, report(t, "degraded-link")))
		for _, bad := range []struct{ name, from, to string }{
			{"status", `"status": "warn"`, `"status": "ok"`},
			{"overall", `"overall": "unknown"`, `"overall": "bad"`},
			{"schema version", `"schema_version": "1"`, `"schema_version": "2"`},
			{"timestamp", `"timestamp": "2026-11-30T05:00:00Z"`, `"timestamp": "yesterday"`},
		} {
			if !strings.Contains(good, bad.from) {
				t.Fatalf("%s: report has no %s", bad.name, bad.from)
			}
			if err := validate([]byte(strings.Replace(good, bad.from, bad.to, 1))); err == nil {
				t.Errorf("%s: schema accepted %s", bad.name, bad.to)
			}
		}
	})
}
