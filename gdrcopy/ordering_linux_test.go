//go:build linux

package gdrcopy

import (
	"testing"

	"github.com/p2pkit/p2pkit/gdrcopy/internal/fakegdrdrv"
	"github.com/p2pkit/p2pkit/gdrcopy/internal/ordertest"
)

// TestOrdering plays the publication protocol of the package
// documentation's "Ordering" through the API, between two threads, on one
// mapping of the fake driver (ordinary write-back memory): data with
// CopyToDevice and flag with StoreUint64; flag with LoadUint64, data with
// CopyFromDevice and acknowledgement with StoreUint64. The consumer must
// see every round's data whole. gdrcopy/internal/wccopy runs the same
// protocol over every kernel variant.
func TestOrdering(t *testing.T) {
	const dataLen = 1 << 17
	rounds := 1000
	if testing.Short() {
		rounds = 100
	}
	for _, persistent := range []bool{true, false} {
		d, mod := openFake(t, fakegdrdrv.Config{Persistent: persistent})
		ptr := allocAligned(t, mod, dataLen+128)
		_, m := pinMap(t, d, ptr, dataLen+128)
		err := ordertest.Run(ordertest.Device{
			Len:      dataLen,
			CopyTo:   m.CopyToDevice,
			CopyFrom: m.CopyFromDevice,
			// Each word in a 64-byte line of its own, after the data.
			Store: func(i int, v uint64) error { return m.StoreUint64(dataLen+64*i, v) },
			Load:  func(i int) (uint64, error) { return m.LoadUint64(dataLen + 64*i) },
		}, rounds)
		if err != nil {
			t.Errorf("persistent %t: %v", persistent, err)
		}
	}
}
