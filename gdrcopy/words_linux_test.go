//go:build linux

package gdrcopy

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/p2pkit/p2pkit/gdrcopy/internal/fakegdrdrv"
)

func TestWords(t *testing.T) {
	const size = 100
	d, mod := openFake(t, fakegdrdrv.Config{Persistent: true})
	ptr := allocAligned(t, mod, size)
	_, m := pinMap(t, d, ptr, size)

	if err := m.StoreUint64(8, 0x1122334455667788); err != nil {
		t.Fatal(err)
	}
	if err := m.StoreUint32(96, 0xaabbccdd); err != nil {
		t.Fatal(err)
	}
	dev := make([]byte, size)
	if err := mod.ReadDevice(dev, ptr); err != nil {
		t.Fatal(err)
	}
	if got := binary.NativeEndian.Uint64(dev[8:]); got != 0x1122334455667788 {
		t.Errorf("device word at 8 = %#x", got)
	}
	if got := binary.NativeEndian.Uint32(dev[96:]); got != 0xaabbccdd {
		t.Errorf("device word at 96 = %#x", got)
	}
	if v, err := m.LoadUint64(8); v != 0x1122334455667788 || err != nil {
		t.Errorf("LoadUint64(8) = %#x, %v", v, err)
	}
	if v, err := m.LoadUint32(96); v != 0xaabbccdd || err != nil {
		t.Errorf("LoadUint32(96) = %#x, %v", v, err)
	}

	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{"store64 unaligned", m.StoreUint64(4, 1), "not 8-byte aligned"},
		{"store32 unaligned", m.StoreUint32(2, 1), "not 4-byte aligned"},
		{"store64 past the end", m.StoreUint64(96, 1), "outside the mapping"},
		{"store32 negative", m.StoreUint32(-4, 1), "outside the mapping"},
		{"load64 past the end", func() error { _, err := m.LoadUint64(100); return err }(), "outside the mapping"},
		{"load32 unaligned", func() error { _, err := m.LoadUint32(1); return err }(), "not 4-byte aligned"},
	} {
		if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, tt.err, tt.want)
		}
	}

	if err := mod.Zap(ptr); err != nil {
		t.Fatal(err)
	}
	if err := m.StoreUint64(0, 1); !errors.Is(err, ErrFault) {
		t.Errorf("store on a zapped mapping: err = %v, want ErrFault", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.LoadUint32(0); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("load after close: err = %v, want fs.ErrClosed", err)
	}
}
