package snapshot

import (
	"bytes"
	"compress/gzip"
	"io"
	"runtime"
	"sync"
)

// Blocks of the tar stream compressed side by side (see blockGzip).
const (
	gzipBlock   = 1 << 20 // bytes of tar stream in one gzip member
	gzipWorkers = 4       // blocks compressed at once, at most
)

// blockGzip compresses what is written to it in blocks of gzipBlock bytes, each a
// gzip member of its own, several at once, and writes the members to w in order. A
// gzip file is a series of members, and decompressing it gives their data one after
// the other (RFC 1952 section 2.2); gzip(1), tar(1), Go's gzip.Reader and Python's
// gzip module all read such a file whole, as they read bgzip's. Deflating is most
// of a capture's user time, and one goroutine deflating the stream bounds the
// capture's speed on a node with many CPUs. Blocks of 1 MiB make the archive of
// the 1,028-function test machine 0.3 % larger than one member did. The member
// boundaries fall at fixed offsets of the stream, so the same stream always gives
// the same bytes.
//
// At most gzipWorkers blocks are in flight: a Write that would start one more
// first waits for the oldest and writes it out. The first error of w is returned
// by that Write and every later call.
type blockGzip struct {
	w        io.Writer
	block    *gzipJob   // being filled; nil until the next Write
	inFlight []*gzipJob // being compressed, oldest first
	idle     []*gzipJob // written out, their buffers kept for the next blocks
	workers  int
	members  int // written to w
	err      error
}

// gzipJob is one block and its member.
type gzipJob struct {
	in   []byte
	out  bytes.Buffer
	done chan struct{}
}

// gzipWriters holds the compressors of finished jobs for the next ones. BestSpeed:
// the archive is a few tens of per cent larger than at the default level and
// deflate costs a third as much; most of a capture is config space and short
// attributes, which compress well either way.
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed) // a valid level: no error
	return zw
}}

func newBlockGzip(w io.Writer) *blockGzip {
	return &blockGzip{w: w, workers: max(1, min(gzipWorkers, runtime.GOMAXPROCS(0)))}
}

func (z *blockGzip) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 && z.err == nil {
		b := z.next()
		m := min(len(p), gzipBlock-len(b.in))
		b.in = append(b.in, p[:m]...)
		p, n = p[m:], n+m
		if len(b.in) == gzipBlock {
			z.start()
		}
	}
	return n, z.err
}

// next returns the block being filled, taking an idle one or a new one if there is
// none.
func (z *blockGzip) next() *gzipJob {
	if z.block == nil {
		if k := len(z.idle); k > 0 {
			z.block, z.idle = z.idle[k-1], z.idle[:k-1]
			z.block.in, z.block.done = z.block.in[:0], make(chan struct{})
			z.block.out.Reset()
		} else {
			z.block = &gzipJob{in: make([]byte, 0, gzipBlock), done: make(chan struct{})}
		}
	}
	return z.block
}

// start compresses the block filled so far in a goroutine of its own, once a
// place is free.
func (z *blockGzip) start() {
	if len(z.inFlight) == z.workers {
		z.finishOldest()
	}
	j := z.next()
	z.block = nil
	z.inFlight = append(z.inFlight, j)
	go func() {
		defer close(j.done)
		zw := gzipWriters.Get().(*gzip.Writer)
		defer gzipWriters.Put(zw)
		zw.Reset(&j.out)
		zw.Write(j.in) // into a bytes.Buffer: no error
		zw.Close()
	}()
}

// finishOldest waits for the oldest job and writes its member.
func (z *blockGzip) finishOldest() {
	j := z.inFlight[0]
	z.inFlight = z.inFlight[1:]
	<-j.done
	if z.err == nil {
		_, z.err = z.w.Write(j.out.Bytes())
		z.members++
	}
	z.idle = append(z.idle, j)
}

// Close compresses what is left, waits for every block and writes them. A stream
// of no bytes still gets one member: a gzip file of none is not one.
func (z *blockGzip) Close() error {
	if z.block != nil && len(z.block.in) > 0 || z.members+len(z.inFlight) == 0 {
		z.start()
	}
	for len(z.inFlight) > 0 {
		z.finishOldest()
	}
	return z.err
}
