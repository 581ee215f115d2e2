package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/p2pkit/p2pkit/hostfs"
)

// The kinds of file 'p2pcheck nccl' reads because a user named them: a topology
// XML is read to ParseXML's own limit; a log, one rank's or a whole job's,
// streams, and only what is explained is kept.
var (
	kindTopoFile = hostfs.Kind{Name: "NCCL topology file", Limit: 4 << 20}
	kindNCCLLog  = hostfs.Kind{Name: "NCCL log", Limit: 512 << 20}
)

// stdin is what "-" reads; a test replaces it.
var stdin io.Reader = os.Stdin

// errInputTooLarge is wrapped by a read of standard input past its bound.
var errInputTooLarge = errors.New("larger than p2pcheck reads")

// openInput opens a file a user named, of kind k, for streaming ("-": standard
// input): hostfs.OpenNamed's rules (regular files only, refused without blocking,
// within the kind's limit and the run's budget).
func (o *globalOptions) openInput(name string, k hostfs.Kind) (io.ReadCloser, error) {
	if name == "-" {
		return &bounded{r: stdin, left: k.Limit, what: "standard input (" + k.Name + ")"}, nil
	}
	return hostfs.OpenNamed(o.reads, name, k)
}

// bounded reads at most left bytes of standard input, and fails rather than
// truncate.
type bounded struct {
	r    io.Reader
	left int64
	what string
}

func (b *bounded) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, _ := b.r.Read(one[:]); n > 0 {
			return 0, fmt.Errorf("%s: %w", b.what, errInputTooLarge)
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *bounded) Close() error { return nil }
