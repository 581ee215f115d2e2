//go:build linux

package gdrcopy

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/p2pkit/p2pkit/gdrcopy/internal/fakegdrdrv"
)

// fakeExporter exports the fake's GPU memory as dma-bufs, as a CUDA
// binding's cuMemGetHandleForAddressRange would.
type fakeExporter struct {
	mod      *fakegdrdrv.Module
	coherent bool
	forced   []bool // forcePCIe of every export
}

func (e *fakeExporter) ExportDMABUF(ptr, size uint64, forcePCIe bool) (DMABUF, error) {
	e.forced = append(e.forced, forcePCIe)
	fd, err := e.mod.ExportDMABUF(ptr, size)
	return DMABUF{FD: fd, Coherent: e.coherent}, err
}

// openDMABUF opens the DMA-BUF backend over mod; the test closes it.
func openDMABUF(t *testing.T, mod *fakegdrdrv.Module, o Options) *Driver {
	t.Helper()
	d, err := openOptions(mod, o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("close driver: %v", err)
		}
	})
	return d
}

// The backend order of OpenOptions: gdrdrv, then DMA-BUF where gdrdrv is
// absent, or DMA-BUF when forced.
func TestOpenOptionsOrder(t *testing.T) {
	tests := []struct {
		name       string
		cfg        fakegdrdrv.Config
		o          Options
		wantDMABUF bool
		wantErr    error
	}{
		{"gdrdrv first", fakegdrdrv.Config{}, Options{DMABUF: &fakeExporter{}}, false, nil},
		{"dma-buf without gdrdrv", fakegdrdrv.Config{OpenErr: unix.ENOENT}, Options{DMABUF: &fakeExporter{}}, true, nil},
		{"dma-buf with a stale node", fakegdrdrv.Config{OpenErr: unix.ENXIO}, Options{DMABUF: &fakeExporter{}}, true, nil},
		{"forced", fakegdrdrv.Config{}, Options{DMABUF: &fakeExporter{}, ForceDMABUF: true}, true, nil},
		{"no exporter", fakegdrdrv.Config{OpenErr: unix.ENOENT}, Options{}, false, ErrDriverNotLoaded},
		{"permission is no reason to fall back", fakegdrdrv.Config{OpenErr: unix.EACCES}, Options{DMABUF: &fakeExporter{}}, false, fs.ErrPermission},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mod := newModule(t, tt.cfg)
			tt.o.Path = fakegdrdrv.DefaultPath
			d, err := openOptions(mod, tt.o)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			a, err := d.Attributes()
			if err != nil {
				t.Fatal(err)
			}
			if a.DMABUF != tt.wantDMABUF {
				t.Errorf("Attributes().DMABUF = %t, want %t", a.DMABUF, tt.wantDMABUF)
			}
			if tt.wantDMABUF && d.Version() != 0 {
				t.Errorf("Version() = %s, want 0 for dma-buf", d.Version())
			}
		})
	}
	if _, err := openOptions(nil, Options{ForceDMABUF: true}); err == nil {
		t.Error("ForceDMABUF without an exporter: no error")
	}
}

// A DMA-BUF buffer pins, maps, copies and closes like a gdrdrv one, in
// host pages: an address inside a GPU page maps too.
func TestDMABUFPinMapCopy(t *testing.T) {
	ps := uint64(os.Getpagesize())
	mod := newModule(t, fakegdrdrv.Config{})
	exp := &fakeExporter{mod: mod}
	d := openDMABUF(t, mod, Options{DMABUF: exp, ForceDMABUF: true})
	base := alloc(t, mod, 64<<10)
	ptr := (base+ps-1)&^(ps-1) + ps + 100 // not host-page aligned either
	const size = 3000
	b, err := d.Pin(ptr, size, PinDefault)
	if err != nil {
		t.Fatal(err)
	}
	info, err := b.Info()
	if err != nil {
		t.Fatal(err)
	}
	wantInfo := Info{VA: ptr &^ (ps - 1), MappedSize: (ptr+size+ps-1)&^(ps-1) - ptr&^(ps-1), PageSize: uint32(ps)}
	if diff := cmp.Diff(wantInfo, info); diff != "" {
		t.Errorf("Info before Map (-want +got):\n%s", diff)
	}
	if _, err := b.MapAs(MappingCaching); !errors.Is(err, ErrNotSupported) {
		t.Errorf("MapAs(caching) of a write-combining dma-buf: err = %v, want ErrNotSupported", err)
	}
	m, err := b.Map()
	if err != nil {
		t.Fatal(err)
	}
	if m.Type() != MappingWC || m.Len() != size {
		t.Errorf("mapping is %s of %d bytes, want write-combining of %d", m.Type(), m.Len(), size)
	}
	if info, _ := b.Info(); info.Mapping != MappingWC {
		t.Errorf("Info().Mapping after Map = %s", info.Mapping)
	}
	data := checkDMABUFCopies(t, mod, b, m, ptr, size)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.CopyToDevice(0, data); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("copy after close: %v", err)
	}
	m2, err := b.Map()
	if err != nil {
		t.Fatalf("map again: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m2.CopyToDevice(0, data); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("copy after closing the buffer: %v", err)
	}
	if diff := cmp.Diff(fakegdrdrv.Stats{}, mod.Stats()); diff != "" {
		t.Errorf("after close (-want +got):\n%s", diff)
	}
	if len(exp.forced) != 1 || exp.forced[0] {
		t.Errorf("exports %v, want one without forcePCIe", exp.forced)
	}
}

// checkDMABUFCopies copies size bytes through m, the mapping of b at device
// address ptr, both ways and checks them on mod; it returns what it copied.
func checkDMABUFCopies(t *testing.T, mod *fakegdrdrv.Module, b *Buffer, m *Mapping, ptr uint64, size int) []byte {
	t.Helper()
	data := bytes.Repeat([]byte("dma-buf "), size/8)
	if err := m.CopyToDevice(0, data); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if err := mod.ReadDevice(got, ptr); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Error("the device does not hold what was copied")
	}
	back := make([]byte, len(data))
	if err := m.CopyFromDevice(back, 0); err != nil || !bytes.Equal(back, data) {
		t.Errorf("copy back: %v, equal %t", err, bytes.Equal(back, data))
	}
	if inv, err := b.Invalidated(); inv || err != nil {
		t.Errorf("Invalidated() = %t, %v; a dma-buf never invalidates", inv, err)
	}
	if err := m.CopyToDevice(size-1, data[:2]); err == nil {
		t.Error("copy past the end succeeded")
	}
	if s := mod.Stats(); s.DMABUFs != 1 || s.Mapped != 1 {
		t.Errorf("module stats %+v, want one dma-buf mapped", s)
	}
	return data
}

// The mapping type follows gdrapi.c gdr_pin_buffer_dmabuf: caching on
// coherent memory unless the pin forces PCIe.
func TestDMABUFMappingType(t *testing.T) {
	for _, tt := range []struct {
		coherent bool
		flags    PinFlags
		want     MappingType
	}{
		{false, PinDefault, MappingWC},
		{false, PinForcePCIe, MappingWC},
		{true, PinDefault, MappingCaching},
		{true, PinForcePCIe, MappingWC},
	} {
		mod := newModule(t, fakegdrdrv.Config{})
		exp := &fakeExporter{mod: mod, coherent: tt.coherent}
		d := openDMABUF(t, mod, Options{DMABUF: exp, ForceDMABUF: true})
		b, err := d.Pin(allocAligned(t, mod, 64<<10), 64<<10, tt.flags)
		if err != nil {
			t.Fatal(err)
		}
		m, err := b.Map()
		if err != nil {
			t.Fatal(err)
		}
		if m.Type() != tt.want || exp.forced[0] != (tt.flags == PinForcePCIe) {
			t.Errorf("coherent %t, flags %d: %s mapping, forcePCIe %t; want %s", tt.coherent, tt.flags, m.Type(), exp.forced[0], tt.want)
		}
	}
}

// A driver that exports but cannot CPU-map its dma-bufs (errno 524, as the
// NVIDIA driver of CUDA 13.0 answers) gives the clear error, and the pin
// still closes cleanly.
func TestDMABUFMmapUnsupported(t *testing.T) {
	mod := newModule(t, fakegdrdrv.Config{DMABUFMmapErr: 524})
	d := openDMABUF(t, mod, Options{DMABUF: &fakeExporter{mod: mod}, ForceDMABUF: true})
	b, err := d.Pin(allocAligned(t, mod, 64<<10), 64<<10, PinDefault)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Map()
	checkDMABUFMmapError(t, err)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkDMABUFMmapError checks the error of mapping a dma-buf the driver
// cannot map for the CPU.
func checkDMABUFMmapError(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrNotSupported) || !errors.Is(err, errnoENOTSUPP) {
		t.Fatalf("map: err = %v, want ErrNotSupported wrapping errno 524", err)
	}
	for _, want := range []string{"errno 524", "CUDA 13.3", "gdrdrv"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("map error %q does not mention %q", err, want)
		}
	}
}

// An export the exporter refuses fails the pin and leaves nothing open.
func TestDMABUFExportFails(t *testing.T) {
	mod := newModule(t, fakegdrdrv.Config{})
	d := openDMABUF(t, mod, Options{DMABUF: &fakeExporter{mod: mod}, ForceDMABUF: true})
	if _, err := d.Pin(0x1000, 4096, PinDefault); !errors.Is(err, unix.EINVAL) {
		t.Errorf("pin of unallocated memory: err = %v, want EINVAL from the export", err)
	}
}
