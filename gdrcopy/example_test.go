package gdrcopy_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/p2pkit/p2pkit/gdrcopy"
)

// This example pins 64 KiB of device memory, maps it and writes and reads
// it from the CPU. devPtr stands for an allocation from cuMemAlloc, made 64
// KiB aligned by over-allocating and rounding up.
func Example() {
	var devPtr uint64 = 0x7f0000000000 // from cuMemAlloc

	d, err := gdrcopy.Open()
	if errors.Is(err, gdrcopy.ErrDriverNotLoaded) {
		log.Fatal(err) // the error says how to load gdrdrv
	}
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()

	b, err := d.Pin(devPtr, 64<<10, gdrcopy.PinDefault)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	m, err := b.Map()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	if err := m.CopyToDevice(0, []byte("hello, GPU")); err != nil {
		log.Fatal(err)
	}
	got := make([]byte, 10)
	if err := m.CopyFromDevice(got, 0); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("gdrdrv %s, %s mapping: %s\n", d.Version(), m.Type(), got)
}
