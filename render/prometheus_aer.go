package render

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/promtext"
)

// aerMetric is the metric of the AER totals in the textfile, a counter;
// aerGauge its name before it was one, read back from a file an older
// p2pcheck wrote.
const (
	aerMetric = "p2pcheck_pcie_aer_errors_total"
	aerGauge  = "p2pcheck_pcie_aer_errors"
)

// maxTextfile bounds what PreviousAER reads: a textfile of a thousand-function
// machine is well below it.
const maxTextfile = 16 << 20

// ErrTextfile is returned for a previous textfile that is not what
// PrometheusRegistry writes.
var ErrTextfile = errors.New("render: previous textfile")

// PreviousAER reads the AER totals back from a textfile PrometheusRegistry
// wrote (the p2pcheck_pcie_aer_errors_total samples, or the gauge
// p2pcheck_pcie_aer_errors of a file an older p2pcheck wrote), keyed by
// function, so that aer_errors can judge their growth since that run. Samples
// with another metric name are ignored; a sample of this metric with a bad address, severity or
// value is an error wrapping ErrTextfile, as is a file over 16 MiB.
func PreviousAER(r io.Reader) (map[pcie.Address]pcie.AERCounts, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxTextfile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxTextfile {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrTextfile, maxTextfile)
	}
	fams, err := promtext.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTextfile, err)
	}
	out := map[pcie.Address]pcie.AERCounts{}
	fam, ok := fams[aerMetric]
	if !ok {
		if fam, ok = fams[aerGauge]; !ok {
			return out, nil
		}
	}
	switch fam.Type {
	case promtext.Counter, promtext.Gauge, promtext.Untyped:
	default:
		return nil, fmt.Errorf("%w: %s is a %s, neither a counter, a gauge nor untyped", ErrTextfile, fam.Name, fam.Type)
	}
	for _, m := range fam.Samples {
		bdf, _ := m.Label("bdf")
		sev, _ := m.Label("severity")
		a, err := pcie.ParseAddress(bdf)
		if err != nil {
			return nil, fmt.Errorf("%w: %s bdf %q: %w", ErrTextfile, fam.Name, bdf, err)
		}
		v := m.Value
		if v < 0 || v > 1<<53 || v != math.Trunc(v) {
			return nil, fmt.Errorf("%w: %s{bdf=%q,severity=%q} = %v is not a count", ErrTextfile, fam.Name, bdf, sev, v)
		}
		c := out[a]
		switch sev {
		case "correctable":
			c.Correctable = uint64(v)
		case "nonfatal":
			c.NonFatal = uint64(v)
		case "fatal":
			c.Fatal = uint64(v)
		default:
			return nil, fmt.Errorf("%w: %s{bdf=%q} has severity %q", ErrTextfile, fam.Name, bdf, sev)
		}
		out[a] = c
	}
	return out, nil
}
