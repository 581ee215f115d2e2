package render

import (
	"bytes"
	"io"
	"time"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/promtext"
)

// Run describes one p2pcheck run for the metrics every textfile carries,
// whether or not the run could evaluate the node.
type Run struct {
	// Up is false when p2pcheck could not read the machine at all.
	Up       bool
	ExitCode int
	Start    time.Time
	Duration time.Duration
	// ToolVersion, Driver and CUDA label p2pcheck_build_info.
	ToolVersion, Driver, CUDA string
}

// runMetrics sets the metrics of the run itself: p2pcheck_up,
// p2pcheck_exit_code, p2pcheck_last_run_timestamp_seconds,
// p2pcheck_run_duration_seconds and p2pcheck_build_info. A stale file shows in
// time() - p2pcheck_last_run_timestamp_seconds.
func runMetrics(reg *promtext.Registry, r Run) {
	reg.Gauge("p2pcheck_up", "1 when the p2pcheck run that wrote this file read the machine and ran its checks, 0 when it could not evaluate the node.").Set(boolFloat(r.Up))
	reg.Gauge("p2pcheck_exit_code", "Exit code of the p2pcheck run that wrote this file.").Set(float64(r.ExitCode))
	reg.Gauge("p2pcheck_last_run_timestamp_seconds", "Unix time the p2pcheck run started.").Set(float64(r.Start.Unix()))
	reg.Gauge("p2pcheck_run_duration_seconds", "How long the p2pcheck run took.").Set(r.Duration.Seconds())
	reg.Gauge("p2pcheck_build_info", "p2pcheck version and the NVIDIA driver and CUDA versions it saw; always 1.", "version", "driver", "cuda").
		Set(1, r.ToolVersion, r.Driver, r.CUDA)
}

// PrometheusUnevaluated returns the textfile registry of a run that could not
// evaluate the node (exit 3 before any check ran: no sysfs, an unreadable
// snapshot, a budget exceeded): only the run's own metrics, with p2pcheck_up 0,
// so that the previous run's results do not stay in place looking current.
func PrometheusUnevaluated(r Run) *promtext.Registry {
	reg := new(promtext.Registry)
	r.Up = false
	runMetrics(reg, r)
	return reg
}

// NFDUnevaluated writes the features.d file of a run that could not evaluate
// the node: p2pcheck.ready=false and p2pcheck.overall=error, with the expiry, so
// that a node does not keep the labels of its last good run.
func NFDUnevaluated(w io.Writer, toolVersion string, expiry time.Time) error {
	var buf bytes.Buffer
	p := newPrinter(&buf)
	nfdHeader(p, toolVersion, expiry)
	p.line(nfdLine("ready", "false"))
	p.line(nfdLine("overall", string(check.Error)))
	if err := p.done(); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// nfdHeader writes the comment naming the writer and the expiry line.
func nfdHeader(p *printer, toolVersion string, expiry time.Time) {
	p.line("# written by p2pcheck " + sanitizeComment(toolVersion) + "; do not edit")
	p.line("# +expiry-time=" + expiry.UTC().Format(time.RFC3339))
}
