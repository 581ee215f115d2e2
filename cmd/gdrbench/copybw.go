package main

import (
	"bytes"
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

type copyBWOptions struct {
	size     int
	copySize int
	offset   int
	shmoo    bool
	wIters   int
	rIters   int
}

func newCopyBWCommand(o *globalOptions) *cobra.Command {
	co := &copyBWOptions{}
	cmd := &cobra.Command{
		Use:   "copybw",
		Short: "write and read bandwidth through the mapping (gdrcopy_copybw)",
		Long: `copybw pins and maps -s bytes, then times -w back-to-back copies of -c bytes
into the mapping at offset -o, and -r copies back out, like gdrcopy_copybw.
With -l it repeats that for every size from 1 byte to -c, doubling. MB/s means
2^20 bytes per second, as in gdrcopy. After each size the data read back is
compared with what was written.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if co.copySize == 0 {
				co.copySize = co.size - co.offset
			}
			switch {
			case co.size < 1 || co.wIters < 1 || co.rIters < 1:
				return usageError("-s, -w and -r must be positive")
			case co.offset < 0 || co.offset%4 != 0:
				return usageError("-o must be a non-negative multiple of 4, not %d", co.offset)
			case co.copySize < 1 || co.offset+co.copySize > co.size:
				return usageError("-o %d plus -c %d does not fit in -s %d", co.offset, co.copySize, co.size)
			}
			return co.run(o)
		},
	}
	f := cmd.Flags()
	f.IntVarP(&co.size, "size", "s", 131072, "buffer size in bytes")
	f.IntVarP(&co.copySize, "copy-size", "c", 0, "bytes per copy (default: the buffer after the offset)")
	f.IntVarP(&co.offset, "offset", "o", 0, "offset into the mapping, a multiple of 4")
	f.BoolVarP(&co.shmoo, "shmoo", "l", false, "sweep copy sizes from 1 byte to -c, doubling")
	f.IntVarP(&co.wIters, "write-iters", "w", 10000, "write iterations")
	f.IntVarP(&co.rIters, "read-iters", "r", 100, "read iterations")
	return cmd
}

// bwRow is one copy size of copybw.
type bwRow struct {
	Size       int     `json:"size"`
	Offset     int     `json:"offset"`
	WriteIters int     `json:"write_iters"`
	WriteMBps  float64 `json:"write_mib_per_s"`
	ReadIters  int     `json:"read_iters"`
	ReadMBps   float64 `json:"read_mib_per_s"`
}

func (co *copyBWOptions) run(o *globalOptions) (err error) {
	e := o.setup("copybw", uint64(co.size), false)
	defer e.closeInto(&err)
	if err := e.ready(); err != nil {
		return err
	}
	buf, m, err := e.pinMap()
	if err != nil {
		return failError(err)
	}
	defer buf.Close()
	e.header()

	sizes := []int{co.copySize}
	if co.shmoo {
		sizes = copySizes(co.copySize)
	}
	src := make([]byte, co.copySize)
	for i := range src {
		src[i] = byte(i*7 + 1)
	}
	dst := make([]byte, co.copySize)
	rows := []bwRow{}
	for _, size := range sizes {
		r := bwRow{Size: size, Offset: co.offset, WriteIters: co.wIters, ReadIters: co.rIters}
		if o.format == "text" {
			fmt.Fprintf(o.stdout, "writing test, size=%d offset=%d num_iters=%d\n", size, co.offset, co.wIters)
		}
		start := time.Now()
		for range co.wIters {
			if err := m.CopyToDevice(co.offset, src[:size]); err != nil {
				return failError(err)
			}
		}
		r.WriteMBps = bandwidthMiBps(size, co.wIters, time.Since(start))
		if o.format == "text" {
			fmt.Fprintf(o.stdout, "write BW: %.2fMB/s\n", r.WriteMBps)
			fmt.Fprintf(o.stdout, "reading test, size=%d offset=%d num_iters=%d\n", size, co.offset, co.rIters)
		}
		clear(dst)
		start = time.Now()
		for range co.rIters {
			if err := m.CopyFromDevice(dst[:size], co.offset); err != nil {
				return failError(err)
			}
		}
		r.ReadMBps = bandwidthMiBps(size, co.rIters, time.Since(start))
		if o.format == "text" {
			fmt.Fprintf(o.stdout, "read BW: %.2fMB/s\n", r.ReadMBps)
		}
		if i := firstDiff(dst[:size], src[:size]); i >= 0 {
			return failError(fmt.Errorf("size %d: byte %d read back as %#x, written as %#x", size, i, dst[i], src[i]))
		}
		rows = append(rows, r)
	}
	e.rep.Results = rows
	if o.format == "json" {
		return o.writeJSON(e.rep)
	}
	return nil
}

// firstDiff returns the first index where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
