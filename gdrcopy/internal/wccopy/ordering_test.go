package wccopy

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/p2pkit/p2pkit/gdrcopy/internal/ordertest"
)

// TestOrdering plays the publication protocol of the package comment's
// "Ordering" (data with ToDevice, flag with Store64; flag with Load64, data
// with FromDevice, acknowledgement with Store64) between two threads, for
// every pair of available store and load kernels, on write-back memory.
// There the streaming stores of ToDevice are still weakly ordered, so its
// SFENCE (DMB ST) is what the protocol rests on.
func TestOrdering(t *testing.T) {
	const dataLen = 1 << 17
	rounds := 1000
	if testing.Short() {
		rounds = 100
	}
	var to, from []kernel
	for _, k := range kernels(t) {
		if raceEnabled && strings.HasSuffix(k.name, "/generic") {
			// The race detector sees the generic kernels' plain accesses
			// and not the fences that order them.
			t.Logf("%s: not run under the race detector", k.name)
			continue
		}
		if k.deviceIsDst {
			to = append(to, k)
		} else {
			from = append(from, k)
		}
	}
	for _, kt := range to {
		for _, kf := range from {
			t.Run(kt.name+"+"+kf.name, func(t *testing.T) {
				data := aligned(dataLen)
				words := aligned(128) // each word in its own 64-byte line
				word := func(i int) *uint64 { return (*uint64)(unsafe.Pointer(&words[64*i])) }
				err := ordertest.Run(ordertest.Device{
					Len: dataLen,
					CopyTo: func(off int, src []byte) error {
						kt.fn(data[off:off+len(src)], src)
						return nil
					},
					CopyFrom: func(dst []byte, off int) error {
						kf.fn(dst, data[off:off+len(dst)])
						return nil
					},
					Store: func(i int, v uint64) error { Store64(word(i), v); return nil },
					Load:  func(i int) (uint64, error) { return Load64(word(i)), nil },
				}, rounds)
				if err != nil {
					t.Error(err)
				}
			})
		}
	}
}
