package p2pmem

import (
	"errors"
	"testing"

	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
)

// TestFixtureNVMeCMB opens the providers of a synthetic machine written as a sysfs
// tree: the QEMU-like NVMe with a 64 MiB CMB is a provider, its peer is not, and on a
// 6.1 kernel the provider has no allocate file.
func TestFixtureNVMeCMB(t *testing.T) {
	for _, tt := range []struct {
		kernel string
		want   error
	}{
		{kernel: "6.12.0-p2pdma"},
		{kernel: "6.1.0-28-amd64", want: ErrKernelTooOld},
	} {
		t.Run(tt.kernel, func(t *testing.T) {
			m := fixture.NVMeCMB().Kernel(tt.kernel)
			root := testsupport.Root(t, m)
			p, err := OpenAddress(root, m.Func("cmb").Address())
			if !errors.Is(err, tt.want) {
				t.Fatalf("OpenAddress(cmb) error = %v; want %v", err, tt.want)
			}
			if err == nil && (p.Size != 64<<20 || p.Available != 64<<20 || !p.Published) {
				t.Errorf("provider %+v; want a published 64 MiB pool, all available", p)
			}
			if _, err := OpenAddress(root, m.Func("peer").Address()); !errors.Is(err, ErrNotProvider) {
				t.Errorf("OpenAddress(peer) error = %v; want ErrNotProvider", err)
			}
		})
	}
}
