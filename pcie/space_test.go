package pcie

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// countingReader is a config file: it counts the registers read and, like the
// kernel for an unprivileged opener, may stop after limit bytes.
type countingReader struct {
	b       []byte
	limit   int
	dwords  int
	reads   int
	seen    map[int64]bool // registers read, by offset
	twice   []int64        // registers read again
	failAt  int64          // a read covering this offset fails; -1 never
	readErr error
}

func (r *countingReader) ReadAt(p []byte, off int64) (int, error) {
	if r.failAt >= 0 && off <= r.failAt && r.failAt < off+int64(len(p)) {
		return 0, r.readErr
	}
	end := min(int(off)+len(p), len(r.b), r.limit)
	if int(off) >= end {
		return 0, io.EOF
	}
	n := copy(p, r.b[off:end])
	r.dwords += (n + 3) / 4
	r.reads++
	if r.seen == nil {
		r.seen = map[int64]bool{}
	}
	for reg := off &^ 3; reg < off+int64(n); reg += 4 {
		if r.seen[reg] {
			r.twice = append(r.twice, reg)
		}
		r.seen[reg] = true
	}
	return n, nil
}

func configSeeds(t testing.TB) map[string][]byte {
	seeds := map[string][]byte{
		"endpoint":     fullEndpoint().bytes(ConfigExpSize),
		"root port":    bridgeCfg(PortRootPort, 1, 3, Link{4, 16}, Link{5, 16}),
		"conventional": newCfg(0x8086, 0x1234, 0x020000, 0).bytes(ConfigSize),
	}
	paths, err := filepath.Glob(filepath.Join("testdata", "h200-2gpu-vm", "*.config"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		seeds[filepath.Base(p)] = b
	}
	return seeds
}

// sparseReads is how many registers ReadConfig reads of the H200 VM's spaces, and in
// how many reads (each a system call on sysfs): the header and the probe past it in
// one, and no register the decoder does not look at (before reads were by register
// rather than by four, the GPUs' took 69 and the root ports' 41).
var sparseReads = map[string]struct{ registers, reads int }{
	"0000_00_00.0.config": {17, 1}, // host bridge, no capabilities
	"0000_00_01.0.config": {22, 6}, "0000_00_02.0.config": {22, 6}, "0000_00_03.0.config": {22, 6},
	"0000_00_04.0.config": {22, 6}, "0000_00_05.0.config": {22, 6}, // root ports
	"0000_00_06.0.config": {33, 15}, "0000_00_07.0.config": {33, 15}, // the H200s
}

// TestReadConfigSparse checks that the registers ReadConfig reads decode exactly
// as the whole space does, and that far fewer registers are read.
func TestReadConfigSparse(t *testing.T) {
	for name, b := range configSeeds(t) {
		t.Run(name, func(t *testing.T) {
			want, err := ParseConfig(b)
			if err != nil {
				t.Fatal(err)
			}
			r := &countingReader{b: b, limit: len(b), failAt: -1}
			sparse, direct, err := ReadConfig(r, len(b))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseConfig(sparse)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("sparse decode differs (-whole +sparse):\n%s", diff)
			}
			if diff := cmp.Diff(want, direct); diff != "" {
				t.Errorf("ReadConfig's own decode differs (-whole +returned):\n%s", diff)
			}
			if r.dwords*4 > len(b)/2 && len(b) == ConfigExpSize {
				t.Errorf("read %d of %d registers", r.dwords, len(b)/4)
			}
			if len(r.twice) > 0 {
				t.Errorf("registers read twice, at %#x", r.twice)
			}
			if want, ok := sparseReads[name]; ok && (r.dwords != want.registers || r.reads != want.reads) {
				t.Errorf("read %d registers in %d reads, want %d in %d (update sparseReads if the decoder now reads more or less)", r.dwords, r.reads, want.registers, want.reads)
			}
		})
	}
}

// TestReadConfigUnprivileged reads a space whose reads stop after the header, as the
// kernel's do for a reader without CAP_SYS_ADMIN: from a reader that returns the
// short count alone, and from one that adds io.EOF as io.ReaderAt asks.
func TestReadConfigUnprivileged(t *testing.T) {
	b := fullEndpoint().bytes(ConfigExpSize)
	for name, r := range map[string]io.ReaderAt{
		"short count": &countingReader{b: b, limit: ConfigHeaderSize, failAt: -1},
		"io.EOF":      io.NewSectionReader(bytes.NewReader(b), 0, ConfigHeaderSize),
	} {
		t.Run(name, func(t *testing.T) {
			got, c, err := ReadConfig(r, len(b))
			if err != nil {
				t.Fatal(err)
			}
			if c == nil || c.CapsKnown || c.Size != ConfigHeaderSize {
				t.Errorf("unprivileged decode %+v, want the header only", c)
			}
			if !bytes.Equal(got, b[:ConfigHeaderSize]) {
				t.Errorf("unprivileged read gave %d bytes, want the 64-byte header", len(got))
			}
		})
	}
}

func TestReadConfigErrors(t *testing.T) {
	b := fullEndpoint().bytes(ConfigExpSize)
	boom := errors.New("boom")
	for _, tt := range []struct {
		name string
		r    io.ReaderAt
		size int
		want error
	}{
		{"short file", &countingReader{b: b[:10], limit: 10, failAt: -1}, ConfigExpSize, io.ErrUnexpectedEOF},
		{"size below header", &countingReader{b: b, limit: len(b), failAt: -1}, 32, ErrInvalidConfig},
		{"header read fails", &countingReader{b: b, limit: len(b), failAt: 0, readErr: boom}, ConfigExpSize, boom},
		{"capability read fails", &countingReader{b: b, limit: len(b), failAt: 0x100, readErr: boom}, ConfigExpSize, boom},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := ReadConfig(tt.r, tt.size); !errors.Is(err, tt.want) {
				t.Errorf("ReadConfig error %v, want %v", err, tt.want)
			}
		})
	}
}

// FuzzReadConfig checks on arbitrary spaces that the sparse read decodes like the
// whole one.
func FuzzReadConfig(f *testing.F) {
	for _, b := range configSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		b = b[:min(len(b), ConfigExpSize)] // no config file is larger
		want, werr := ParseConfig(b)
		sparse, _, err := ReadConfig(&countingReader{b: b, limit: len(b), failAt: -1}, len(b))
		if err != nil && sparse == nil {
			if len(b) >= ConfigHeaderSize {
				t.Fatalf("ReadConfig of %d bytes: %v", len(b), err)
			}
			return
		}
		got, gerr := ParseConfig(sparse)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("whole error %v, sparse error %v", werr, gerr)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("sparse decode differs (-whole +sparse):\n%s", diff)
		}
	})
}
