// Package ordertest checks, for the tests of gdrcopy and its copy kernels,
// the ordering guarantee a producer and a consumer of device memory rely
// on: data copied to the device and then flagged is seen whole by whoever
// polls the flag and then copies the data back (see "Ordering" in the
// package comment of gdrcopy/internal/wccopy).
package ordertest

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// Device is device memory seen through the functions under test: Len bytes
// of data from offset 0, and two 8-byte words, the producer's sequence
// number (word 0) and the consumer's acknowledgement (word 1).
type Device struct {
	Len      int
	CopyTo   func(off int, src []byte) error
	CopyFrom func(dst []byte, off int) error
	Store    func(word int, v uint64) error
	Load     func(word int) (uint64, error)
}

// sizes are the copy sizes the rounds cycle through: word-sized copies
// that take only the 1- to 8-byte accesses, copies that reach the 16- and
// 32-byte steps and the bulk, and a long one.
var sizes = []int{1, 4, 8, 13, 16, 31, 32, 63, 64, 100, 257, 4096, 65536 + 13}

// Pattern returns the byte the producer writes at index i of round k: every
// byte differs from the one of round k-1.
func Pattern(k uint64, i int) byte { return byte(k) ^ byte(i*7) }

// Run plays rounds of the protocol on two goroutines, each locked to its own
// thread. In round k (from 1) the producer copies Pattern(k) to the device
// with CopyTo and then stores k in word 0; the consumer polls word 0 with
// Load until it reads k, copies the data back with CopyFrom, and stores k in
// word 1, which the producer polls before it overwrites the data in round
// k+1. Every byte the consumer reads must be that of round k: a store of
// the data that reached the device after the flag, a load that passed the
// flag's, or an acknowledgement that passed the consumer's loads would
// show as bytes of another round, and Run returns an error saying which.
// Size and offset change with every round.
func Run(d Device, rounds int) error {
	if err := d.Store(0, 0); err != nil {
		return err
	}
	if err := d.Store(1, 0); err != nil {
		return err
	}
	var (
		stop atomic.Bool
		wg   sync.WaitGroup
		errs [2]error
	)
	for i, side := range []func(Device, int, *atomic.Bool) error{produce, consume} {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if err := side(d, rounds, &stop); err != nil {
				errs[i] = err
				stop.Store(true)
			}
		})
	}
	wg.Wait()
	if errs[0] != nil {
		errs[0] = fmt.Errorf("producer: %w", errs[0])
	}
	if errs[1] != nil {
		errs[1] = fmt.Errorf("consumer: %w", errs[1])
	}
	return errors.Join(errs[:]...)
}

// shape returns the size and offset of round k's copy.
func shape(d Device, k uint64) (n, off int) {
	n = min(sizes[int(k)%len(sizes)], d.Len)
	off = int(k*13) % (d.Len - n + 1)
	return n, off
}

// await polls word until it reads want. It returns false if the other side
// stopped.
func await(d Device, word int, want uint64, stop *atomic.Bool) (bool, error) {
	for !stop.Load() {
		v, err := d.Load(word)
		if err != nil || v == want {
			return err == nil, err
		}
		runtime.Gosched()
	}
	return false, nil
}

func produce(d Device, rounds int, stop *atomic.Bool) error {
	src := make([]byte, d.Len)
	for k := uint64(1); k <= uint64(rounds); k++ {
		if ok, err := await(d, 1, k-1, stop); !ok {
			return err
		}
		n, off := shape(d, k)
		for i := range n {
			src[i] = Pattern(k, off+i)
		}
		if err := d.CopyTo(off, src[:n]); err != nil {
			return err
		}
		if err := d.Store(0, k); err != nil {
			return err
		}
	}
	return nil
}

func consume(d Device, rounds int, stop *atomic.Bool) error {
	dst := make([]byte, d.Len)
	for k := uint64(1); k <= uint64(rounds); k++ {
		if ok, err := await(d, 0, k, stop); !ok {
			return err
		}
		n, off := shape(d, k)
		if err := d.CopyFrom(dst[:n], off); err != nil {
			return err
		}
		for i, b := range dst[:n] {
			if want := Pattern(k, off+i); b != want {
				return fmt.Errorf("round %d (%d bytes at %d): byte %d is %#x, want %#x: the data of another round",
					k, n, off, i, b, want)
			}
		}
		if err := d.Store(1, k); err != nil {
			return err
		}
	}
	return nil
}
