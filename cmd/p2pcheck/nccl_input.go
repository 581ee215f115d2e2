package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Bounds of the files 'p2pcheck nccl' reads because a user named them: a
// topology XML is read to ParseXML's own limit; a log, one rank's or a whole
// job's, streams and only what is explained is kept.
const (
	maxTopoFile = 4 << 20
	maxLogFile  = 1 << 30
)

// stdin is what "-" reads; a test replaces it.
var stdin io.Reader = os.Stdin

// errInputTooLarge is wrapped by a read past an input's bound.
var errInputTooLarge = errors.New("larger than p2pcheck reads")

// openUserInput opens a file a user named for reading at most limit bytes ("-":
// standard input). Only a regular file is opened, and without blocking: the type
// is looked at before the open, the open cannot wait for a FIFO's writer, and the
// open file must be the one looked at. (This stands in for the run's one reader
// of named files, hostfs.OpenNamed, until it is on main.)
func openUserInput(name string, limit int64) (io.ReadCloser, error) {
	if name == "-" {
		return &bounded{r: stdin, left: limit, name: "standard input"}, nil
	}
	before, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if !before.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("not a regular file (%s)", before.Mode().Type())}
	}
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	after, err := f.Stat()
	if err == nil && (!after.Mode().IsRegular() || !os.SameFile(before, after)) {
		err = &fs.PathError{Op: "open", Path: name, Err: errors.New("replaced while it was opened")}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &bounded{r: f, c: f, left: limit, name: name}, nil
}

// bounded reads at most left bytes, and fails rather than truncate.
type bounded struct {
	r    io.Reader
	c    io.Closer
	left int64
	name string
}

func (b *bounded) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, _ := b.r.Read(one[:]); n > 0 {
			return 0, fmt.Errorf("%s: %w", b.name, errInputTooLarge)
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

func (b *bounded) Close() error {
	if b.c == nil {
		return nil
	}
	return b.c.Close()
}
