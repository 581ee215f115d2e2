package p2pdma

import (
	"iter"

	"github.com/p2pkit/p2pkit/pcie"
)

// Ends are the provider and the client of one verdict.
type Ends struct{ Provider, Client *pcie.Device }

// AllEnds yields what All yields, in the same order, each verdict with its two
// functions. All goes provider-major over the distinct pairs of devices, so the
// two are found by counting, not by looking the addresses up.
func (c *Calculator) AllEnds(devices []*pcie.Device) iter.Seq2[Ends, Verdict] {
	return func(yield func(Ends, Verdict) bool) {
		i, j := 0, 0
		for v := range c.All(devices) {
			if j == i {
				j++
			}
			if j == len(devices) {
				i, j = i+1, 0
				if j == i {
					j++
				}
			}
			if !yield(Ends{devices[i], devices[j]}, v) {
				return
			}
			j++
		}
	}
}
