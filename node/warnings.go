package node

import (
	"errors"
	"fmt"

	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/sysfs"
)

// foldMissingConfig reports a systematic absence once: when two or more functions
// have no config file at all, their per-function errors are cleared (their Config
// stays nil, so every fact that needs it remains unknown) and one warning says
// what is missing and why it matters. A single function without one keeps its own
// error.
func foldMissingConfig(recs []pcie.Record) error {
	var missing []int
	for i := range recs {
		if sysfs.ConfigMissing(recs[i].Err) {
			missing = append(missing, i)
		}
	}
	if len(missing) < 2 {
		return nil
	}
	for _, i := range missing {
		recs[i].Err = nil
	}
	what := fmt.Sprintf("%d of %d functions", len(missing), len(recs))
	if len(missing) == len(recs) {
		what = fmt.Sprintf("all %d functions", len(recs))
	}
	return fmt.Errorf("%w: %s have no config file (a tree captured without them, or a container that hides them): port types, capabilities, link registers and ACS are unknown; the link attributes are used where present", ErrNoConfig, what)
}

// ErrNoConfig is the warning foldMissingConfig gives.
var ErrNoConfig = errors.New("no config space")
