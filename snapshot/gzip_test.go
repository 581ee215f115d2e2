package snapshot

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"math/rand/v2"
	"os/exec"
	"testing"
)

// members decompresses a gzip file member by member.
func members(t *testing.T, b []byte) [][]byte {
	t.Helper()
	br := bufio.NewReader(bytes.NewReader(b))
	zr, err := gzip.NewReader(br)
	if err != nil {
		t.Fatalf("gzip.NewReader: %v", err)
	}
	var out [][]byte
	for {
		zr.Multistream(false)
		data, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("member %d: %v", len(out), err)
		}
		out = append(out, data)
		if err := zr.Reset(br); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatalf("member %d: %v", len(out), err)
		}
	}
}

// compressible is n bytes that deflate compresses, as a tar of sysfs is.
func compressible(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 64 {
		v := rng.Uint64()
		for k := i; k < min(n, i+8); k++ {
			b[k], v = byte(v), v>>8
		}
	}
	return b
}

// TestBlockGzip writes streams of many lengths in random pieces: the file is one
// member per gzipBlock bytes (one for no bytes), decompresses to the stream, and is
// the same bytes however the stream was cut into writes.
func TestBlockGzip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, gzipBlock - 1, gzipBlock, gzipBlock + 1, (gzipWorkers+2)*gzipBlock + gzipBlock/2} {
		data := compressible(rng, n)
		var first []byte
		for round := range 2 {
			var out bytes.Buffer
			z := newBlockGzip(&out)
			for rest := data; len(rest) > 0; {
				k := min(len(rest), 1+rng.IntN(3*gzipBlock/2))
				if round == 0 {
					k = len(rest) // one write
				}
				if m, err := z.Write(rest[:k]); m != k || err != nil {
					t.Fatalf("n=%d: Write = %d, %v; want %d, nil", n, m, err, k)
				}
				rest = rest[k:]
			}
			if err := z.Close(); err != nil {
				t.Fatalf("n=%d: Close: %v", n, err)
			}
			ms := members(t, out.Bytes())
			if want := max(1, (n+gzipBlock-1)/gzipBlock); len(ms) != want || z.members != want {
				t.Errorf("n=%d: %d members (counted %d), want %d", n, len(ms), z.members, want)
			}
			if got := bytes.Join(ms, nil); !bytes.Equal(got, data) {
				t.Fatalf("n=%d: decompressed %d bytes, not the %d written", n, len(got), n)
			}
			if round == 0 {
				first = out.Bytes()
			} else if !bytes.Equal(out.Bytes(), first) {
				t.Errorf("n=%d: the file depends on how the stream was cut into writes", n)
			}
		}
	}
}

// TestBlockGzipTool has gzip(1) decompress a file of several members: the archive
// reads with the standard tool, not only with Go's reader.
func TestBlockGzipTool(t *testing.T) {
	gz, err := exec.LookPath("gzip")
	if err != nil {
		t.Skip("no gzip(1) on this host")
	}
	data := compressible(rand.New(rand.NewPCG(3, 4)), 3*gzipBlock+12345)
	var out bytes.Buffer
	z := newBlockGzip(&out)
	z.Write(data)
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gz, "-dc")
	cmd.Stdin = &out
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("gzip -dc: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("gzip -dc gave %d bytes, not the %d written", len(got), len(data))
	}
}

// failAfter takes n bytes, then fails every write.
type failAfter struct{ n int }

var errFull = errors.New("disk full")

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		return 0, errFull
	}
	f.n -= len(p)
	return len(p), nil
}

// TestBlockGzipError: the first error of the file is returned by the Write that
// met it or a later one, and by Close, which still waits for every block.
func TestBlockGzipError(t *testing.T) {
	data := compressible(rand.New(rand.NewPCG(5, 6)), (gzipWorkers+4)*gzipBlock)
	z := newBlockGzip(&failAfter{n: 1000})
	var werr error
	for rest := data; len(rest) > 0 && werr == nil; rest = rest[min(len(rest), gzipBlock/3):] {
		_, werr = z.Write(rest[:min(len(rest), gzipBlock/3)])
	}
	if !errors.Is(werr, errFull) {
		t.Errorf("Write: %v, want %v", werr, errFull)
	}
	if err := z.Close(); !errors.Is(err, errFull) {
		t.Errorf("Close: %v, want %v", err, errFull)
	}
	if len(z.inFlight) != 0 {
		t.Errorf("%d blocks still in flight after Close", len(z.inFlight))
	}
}
