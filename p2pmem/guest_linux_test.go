//go:build linux

package p2pmem

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/p2pkit/p2pkit/pcie"
	"golang.org/x/sys/unix"
)

// Environment of TestGuestRoundTrip.
const (
	envProvider  = "P2PKIT_P2PMEM_PROVIDER" // BDF or sysfs directory of a provider (an NVMe with a CMB)
	envTarget    = "P2PKIT_P2PMEM_TARGET"   // block device to write, e.g. /dev/nvme1n1: its first MiB is overwritten
	envRequireHW = "P2PKIT_REQUIRE_HW"
)

// TestGuestRoundTrip moves 1 MiB between p2pmem and a block device with O_DIRECT, in
// both directions, so the NVMe controller DMAs straight from and into the provider's
// BAR memory. It needs a kernel with CONFIG_PCI_P2PDMA (6.2 or later), root, and the
// two variables above; it destroys the first MiB of the target. It prints one line,
// "P2PMEM ROUNDTRIP PASS ..." or "P2PMEM ROUNDTRIP FAIL ...", for logs of guests that
// have nothing but busybox. Run it with:
//
//	CGO_ENABLED=0 go test -c ./p2pmem
//	P2PKIT_P2PMEM_PROVIDER=0000:01:00.0 P2PKIT_P2PMEM_TARGET=/dev/nvme1n1 \
//	    ./p2pmem.test -test.run TestGuestRoundTrip -test.v
func TestGuestRoundTrip(t *testing.T) {
	provider, target := os.Getenv(envProvider), os.Getenv(envTarget)
	if provider == "" || target == "" {
		msg := fmt.Sprintf("%s and %s are not both set: this test needs a P2PDMA provider and a scratch block device", envProvider, envTarget)
		if os.Getenv(envRequireHW) == "1" {
			fmt.Println("P2PMEM ROUNDTRIP FAIL: " + msg)
			t.Fatal(msg + " (" + envRequireHW + "=1)")
		}
		t.Skip(msg)
	}
	fail := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		fmt.Println("P2PMEM ROUNDTRIP FAIL: " + msg)
		t.Fatal(msg)
	}
	const size = 1 << 20

	dir := provider
	if a, err := pcie.ParseAddress(provider); err == nil {
		dir = filepath.Join("/sys/bus/pci/devices", a.String())
	}
	p, err := Open(dir)
	if err != nil {
		fail("open provider: %v", err)
	}
	t.Logf("provider %s: size %d, available %d, published %v", dir, p.Size, p.Available, p.Published)
	buf, err := p.Alloc(size)
	if err != nil {
		fail("allocate %d bytes: %v", size, err)
	}
	defer buf.Close()
	if avail, err := p.ReadAvailable(); err == nil {
		t.Logf("available after allocating: %d", avail)
	}

	fd, err := unix.Open(target, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		fail("open %s with O_DIRECT: %v", target, err)
	}
	defer unix.Close(fd)
	// Ordinary page-aligned memory for the other side of each transfer.
	plain, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		fail("mmap anonymous memory: %v", err)
	}
	defer unix.Munmap(plain)

	fill := func(b []byte, seed byte) {
		for i := range b {
			b[i] = byte(i>>12) ^ byte(i)*31 ^ seed
		}
	}
	want := make([]byte, size)

	// p2pmem -> disk: the controller reads the CMB.
	fill(want, 0xa5)
	copy(buf.Bytes(), want)
	if n, err := unix.Pwrite(fd, buf.Bytes(), 0); err != nil || n != size {
		fail("O_DIRECT write from p2pmem to %s: %d bytes, %v (EREMOTEIO means the queue does not take P2PDMA pages)", target, n, err)
	}
	if err := unix.Fsync(fd); err != nil {
		fail("fsync %s: %v", target, err)
	}
	if n, err := unix.Pread(fd, plain, 0); err != nil || n != size {
		fail("O_DIRECT read from %s: %d bytes, %v", target, n, err)
	}
	if !bytes.Equal(plain, want) {
		fail("data written from p2pmem read back different from %s", target)
	}

	// disk -> p2pmem: the controller writes the CMB.
	fill(want, 0x3c)
	copy(plain, want)
	if n, err := unix.Pwrite(fd, plain, 0); err != nil || n != size {
		fail("O_DIRECT write to %s: %d bytes, %v", target, n, err)
	}
	if err := unix.Fsync(fd); err != nil {
		fail("fsync %s: %v", target, err)
	}
	if n, err := unix.Pread(fd, buf.Bytes(), 0); err != nil || n != size {
		fail("O_DIRECT read from %s into p2pmem: %d bytes, %v", target, n, err)
	}
	got := make([]byte, size)
	copy(got, buf.Bytes())
	if !bytes.Equal(got, want) {
		fail("data read into p2pmem differs from what %s holds", target)
	}

	if err := buf.Close(); err != nil {
		fail("close buffer: %v", err)
	}
	if avail, err := p.ReadAvailable(); err == nil {
		t.Logf("available after closing: %d", avail)
	}
	fmt.Printf("P2PMEM ROUNDTRIP PASS provider=%s target=%s bytes=%d (p2pmem->disk and disk->p2pmem, O_DIRECT)\n", dir, target, size)
}
