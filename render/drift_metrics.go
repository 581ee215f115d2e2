package render

import (
	"bytes"
	"io"
	"strconv"
	"time"

	"github.com/p2pkit/p2pkit/drift"
	"github.com/p2pkit/p2pkit/promtext"
)

// OutcomeValue is the number a drift outcome takes in the metrics, on the scale
// of StatusValue: 0 no drift, 1 drift that changes no verdict, 2 drift that
// changes verdicts, 5 could not compare.
func OutcomeValue(o drift.Outcome) float64 {
	switch o {
	case drift.OutcomeNone:
		return 0
	case drift.OutcomeWarn:
		return 1
	case drift.OutcomeVerdict:
		return 2
	}
	return 5
}

// FabricMetrics adds to the report's textfile registry the node's fabric
// signature, p2pcheck_fabric_signature_info{signature} 1, a stable hash of the
// facts its verdicts rest on (drift.Summary.Signature): nodes outside the
// fleet's majority signature are those with fabric drift (docs/diff.md has the
// PromQL). With a golden file (golden non-nil), it adds the comparison with it:
// p2pcheck_fabric_drift_changes{kind} for every kind and
// p2pcheck_fabric_drift_outcome (OutcomeValue), and the golden's own signature
// as p2pcheck_fabric_golden_signature_info{signature} 1.
func FabricMetrics(reg *promtext.Registry, signature string, golden *DiffReport) {
	reg.Gauge("p2pcheck_fabric_signature_info", "Fabric signature of the node: a hash of the facts its peer-to-peer verdicts rest on; always 1.", "signature").
		Set(1, signature)
	if golden == nil {
		return
	}
	reg.Gauge("p2pcheck_fabric_golden_signature_info", "Fabric signature of the golden file the node is compared with; always 1.", "signature").
		Set(1, golden.Golden.Signature)
	changes := reg.Gauge("p2pcheck_fabric_drift_changes", "Differences of each kind between the node and the golden file (p2pcheck diff).", "kind")
	for _, k := range drift.Kinds() {
		changes.Set(float64(golden.Counts[k]), string(k))
	}
	reg.Gauge("p2pcheck_fabric_drift_outcome", "Drift from the golden file: 0 none, 1 no verdict changed, 2 verdicts changed, 5 could not compare.").
		Set(OutcomeValue(golden.Outcome))
}

// DiffMetrics fills the registry of p2pcheck diff's own textfile. Its metrics
// are named p2pcheck_diff_*, apart from the report's, so that both textfiles can
// sit in one node_exporter directory without a collision:
//
//   - p2pcheck_diff_info{golden_signature,node_signature} 1
//   - p2pcheck_diff_changes{kind}: the differences of each kind
//   - p2pcheck_diff_outcome (OutcomeValue) and p2pcheck_diff_exit_code
//   - p2pcheck_diff_last_run_timestamp_seconds
func DiffMetrics(reg *promtext.Registry, r DiffReport, start time.Time) {
	reg.Gauge("p2pcheck_diff_info", "Fabric signatures of the golden file and of the node p2pcheck diff compared; always 1.", "golden_signature", "node_signature").
		Set(1, r.Golden.Signature, r.Node.Signature)
	changes := reg.Gauge("p2pcheck_diff_changes", "Differences of each kind between the node and the golden file.", "kind")
	for _, k := range drift.Kinds() {
		changes.Set(float64(r.Counts[k]), string(k))
	}
	reg.Gauge("p2pcheck_diff_outcome", "Drift from the golden file: 0 none, 1 no verdict changed, 2 verdicts changed, 5 could not compare.").
		Set(OutcomeValue(r.Outcome))
	reg.Gauge("p2pcheck_diff_exit_code", "Exit code of the p2pcheck diff run that wrote this file.").Set(float64(r.ExitCode))
	reg.Gauge("p2pcheck_diff_last_run_timestamp_seconds", "Unix time the p2pcheck diff run started.").Set(float64(start.Unix()))
}

// DiffNFD writes a comparison as a node-feature-discovery features.d file (see
// NFDFeatures for the format):
//
//	feature.node.kubernetes.io/p2pcheck.drift=verdict
//	feature.node.kubernetes.io/p2pcheck.drift.signature=3ed2781529f0ec5e
//	feature.node.kubernetes.io/p2pcheck.drift.golden-signature=f75146dd0dab1875
//	feature.node.kubernetes.io/p2pcheck.drift.acs=24
//
// with drift none, warn, verdict or unknown, and one count per kind.
func DiffNFD(w io.Writer, r DiffReport, toolVersion string, expiry time.Time) error {
	var buf bytes.Buffer
	p := newPrinter(&buf)
	nfdHeader(p, toolVersion, expiry)
	p.line(nfdLine("drift", string(r.Outcome)))
	p.line(nfdLine("drift.signature", r.Node.Signature))
	p.line(nfdLine("drift.golden-signature", r.Golden.Signature))
	for _, k := range drift.Kinds() {
		p.line(nfdLine("drift."+string(k), strconv.Itoa(r.Counts[k])))
	}
	if err := p.done(); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}
