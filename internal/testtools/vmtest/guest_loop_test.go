//go:build vmtest

package vmtest

import (
	"testing"

	"github.com/p2pkit/p2pkit/pcie"
)

// TestGuestWalkerLoop runs the guest's walkers on an extended capability list that
// loops: acsctl must stop at its 480-step bound with no answer. Each step launches
// two processes, which is why this case is in the kernel tier and not in the unit
// tests of `make test`.
func TestGuestWalkerLoop(t *testing.T) {
	runWalkers(t, []walkerCase{
		{"extended list loops", configSpace(pcie.PortEndpoint, false, [][2]int{{0x100, 0x01}}, 0, true), "", "0"},
	})
}
