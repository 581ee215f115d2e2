package snapshot

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
)

// machineRoot returns the fixture machine m as a root held in memory.
func machineRoot(t *testing.T, m *fixture.Machine) hostfs.Root {
	t.Helper()
	var buf bytes.Buffer
	if err := m.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	root, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestWriterRefusesWhatReaderRefuses: for each aggregate limit of the budget (tree
// nodes, file data, decompressed bytes), at the value a capture needs and one
// below, the writer and the reader agree: both take the archive, or the writer
// refuses, naming the limit, and the reader refuses the archive written without it.
func TestWriterRefusesWhatReaderRefuses(t *testing.T) {
	src := machineRoot(t, fixture.SRIOVNIC())
	var full bytes.Buffer
	sum, err := writeBudget(src, &full, Options{}, hostfs.DefaultBudget)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(full.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	stream, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	root, err := Read(bytes.NewReader(full.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var data int64
	walkFiles(t, root, ".", func(n int) { data += int64(n) })
	for _, tt := range []struct {
		limit string
		need  int64
		set   func(*hostfs.Budget, int64)
	}{
		{"Members", int64(sum.Members) + 1, func(b *hostfs.Budget, v int64) { b.Members = int(v) }}, // the root is a node too
		{"Data", data, func(b *hostfs.Budget, v int64) { b.Data = v }},
		{"Bytes", int64(len(stream)), func(b *hostfs.Budget, v int64) { b.Bytes = v }},
	} {
		for _, v := range []int64{tt.need, tt.need - 1} {
			b := hostfs.DefaultBudget
			tt.set(&b, v)
			_, werr := writeBudget(src, io.Discard, Options{}, b)
			_, rerr := ReadBudget(bytes.NewReader(full.Bytes()), b)
			var be *hostfs.BudgetError
			switch {
			case (werr == nil) != (rerr == nil):
				t.Errorf("%s=%d: writer %v, reader %v: they disagree", tt.limit, v, werr, rerr)
			case werr != nil && (!errors.As(werr, &be) || be.Limit != tt.limit):
				t.Errorf("%s=%d: writer refused with %v, want Budget.%s named", tt.limit, v, werr, tt.limit)
			case v == tt.need && werr != nil:
				t.Errorf("%s=%d, what the capture needs: writer %v", tt.limit, v, werr)
			case v < tt.need && werr == nil:
				t.Errorf("%s=%d, one below what the capture needs: written", tt.limit, v)
			}
		}
	}
}

// walkFiles calls f with the size of every regular file below name.
func walkFiles(t *testing.T, r hostfs.Root, name string, f func(int)) {
	t.Helper()
	ents, err := r.ReadDir(name)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		p := e.Name
		if name != "." {
			p = name + "/" + e.Name
		}
		switch {
		case e.Type.IsDir():
			walkFiles(t, r, p, f)
		case e.Type == 0:
			b, err := r.ReadFile(p, hostfs.MaxFileSize)
			if err != nil {
				t.Fatal(err)
			}
			f(len(b))
		}
	}
}

// heapWriter samples the live heap every few hundred kilobytes written.
type heapWriter struct {
	n, next uint64
	max     uint64
}

func (h *heapWriter) Write(p []byte) (int, error) {
	h.n += uint64(len(p))
	if h.n >= h.next {
		h.next = h.n + 256<<10
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		h.max = max(h.max, ms.HeapAlloc)
	}
	return len(p), nil
}

// TestWriteStreams: the capture holds no member once written, so the live heap
// grows by little more than a hash per name while a 1,000-function machine is
// captured (f0912a0 held every member, with a 4 KiB buffer per attribute: about
// 180 KiB a function). Bytes, not time: the bound does not depend on the machine.
func TestWriteStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 1,000-function machine")
	}
	src := machineRoot(t, fixture.Scaled(8, 1000-68))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	w := &heapWriter{}
	sum, err := Write(src, w)
	if err != nil {
		t.Fatal(err)
	}
	const bound = 16 << 20
	if grew := int64(w.max) - int64(ms.HeapAlloc); grew > bound {
		t.Errorf("live heap grew by %d MB while %d members were written, want at most %d MB", grew>>20, sum.Members, bound>>20)
	}
	t.Logf("%d members, live heap %d MB before, at most %d MB while writing", sum.Members, ms.HeapAlloc>>20, w.max>>20)
}

// TestChild: child joins as path.Join does, for listed names and any other.
func TestChild(t *testing.T) {
	for _, tt := range []struct{ dir, name string }{
		{"sys/devices/pci0000:00", "0000:00:01.0"},
		{"sys/bus/pci/devices", "config"},
		{"sys", ".."},
		{"sys", "."},
		{"sys", ""},
		{"", "sys"},
		{"sys", "a/../b"},
		{"sys", "/abs"},
	} {
		if got, want := child(tt.dir, tt.name), join(tt.dir, tt.name); got != want {
			t.Errorf("child(%q, %q) = %q, want %q", tt.dir, tt.name, got, want)
		}
	}
}
