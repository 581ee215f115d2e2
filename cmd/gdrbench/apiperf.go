package main

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/p2pkit/p2pkit/gdrcopy"
)

type apiPerfOptions struct {
	size   int
	iters  int
	warmup int

	copies bool
	peer   string
	serve  bool
	rounds int
	cpu    int
}

func newAPIPerfCommand(o *globalOptions) *cobra.Command {
	ao := &apiPerfOptions{}
	cmd := &cobra.Command{
		Use:   "apiperf",
		Short: "cost of pin, map, get_info, unmap and unpin per size (gdrcopy_apiperf)",
		Long: `apiperf times each gdrdrv operation on buffers from 64 KiB to -s, doubling,
like gdrcopy_apiperf: -w untimed warm-up rounds, then -n timed rounds of pin,
map, get info, unmap and unpin. It prints the mean of each in microseconds.

--copies times the copies instead, and needs neither gdrdrv nor a GPU: for
every size from 1 byte to -s, doubling, CopyToDevice and CopyFromDevice on
write-back host memory that gdrcopy maps write-combining (a memfd through its
DMA-BUF backend), the bare kernels on the same buffers, and with --peer the
copies of another implementation, in --rounds interleaved rounds: in each,
every test runs a batch of about 200 µs on each side, the sides taking turns at
going first. It prints the median and the minimum over the rounds of each
side's time per copy and, with a peer, the median, minimum and maximum of the
rounds' ratios to it.

--cpu N times every side's copies on CPU N: gdrbench pins the one thread that
times its copies there, and asks the peer to pin its own (GDRBENCH_CPU=N in
its environment), so that the sides take turns on one CPU and the Go runtime's
other threads run on the other CPUs. Pinning the whole of gdrbench to one CPU
instead (taskset -c N) puts those threads on the CPU being timed, where they
interrupt the copies: on a 2-core machine that took 16,353 involuntary context
switches in a run against 1,836 with --cpu, and put the Go sides of copies of
4 MiB and up at 1.1-1.4x libgdrapi's median time, where --cpu gives 0.95-1.03.

The peer is a program that speaks this protocol on its standard input and
output, one line each:

  peer:     gdrbench-peer 1 <what it measures>
  gdrbench: to <size> <iters>      or: from <size> <iters>
  peer:     <nanoseconds>          or: error <reason>
  gdrbench: quit

A peer started with GDRBENCH_CPU=N in its environment runs its copies on CPU N
only, and says so at the end of its greeting ("on CPU N"); without it, where
the scheduler puts it. For each request the peer takes a device-side buffer of size bytes in a shared
mapping of a memfd, as gdrbench's own is, and a host-side one that begins 64
bytes past a page boundary;
writes every byte of both with ordinary stores, front to back (no memset, which
may stream); copies once untimed; then times iters copies back to back and
answers their total time. A program that calls
libgdrapi's gdr_copy_to_mapping and gdr_copy_from_mapping compares gdrcopy
with libgdrapi: p2pkit's source has one, built against a gdrcopy source tree
you point to (make gdrapi-peer GDRCOPY_SRC=DIR; make bench-copies runs both
comparisons). --serve makes gdrbench a
peer with its own CopyToDevice and CopyFromDevice: --peer "gdrbench apiperf
--copies --serve" times the same copies on both sides, which shows how far
apart the method puts two equal implementations on this machine.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return ao.check(o, cmd.InOrStdin())
		},
	}
	f := cmd.Flags()
	f.IntVarP(&ao.size, "size", "s", 16<<20, "largest buffer size in bytes")
	f.IntVarP(&ao.iters, "iters", "n", 100, "timed rounds per size")
	f.IntVarP(&ao.warmup, "warmup", "w", 10, "untimed warm-up rounds per size")
	f.BoolVar(&ao.copies, "copies", false, "time the copies on host memory instead of the gdrdrv operations")
	f.StringVar(&ao.peer, "peer", "", "with --copies, also time the copies of this peer command (a program and its arguments, split at spaces)")
	f.BoolVar(&ao.serve, "serve", false, "with --copies, be a peer: answer the peer protocol on standard input and output with this gdrbench's copies")
	f.IntVar(&ao.rounds, "rounds", 21, "with --copies, the number of interleaved rounds")
	f.IntVar(&ao.cpu, "cpu", -1, "with --copies, time every side's copies on this CPU: gdrbench's timing thread and the peer (-1: wherever the scheduler puts them)")
	return cmd
}

// check validates the flags and runs the chosen measurement; in is the
// standard input --serve reads.
func (ao *apiPerfOptions) check(o *globalOptions, in io.Reader) error {
	switch {
	case ao.copies && (ao.size < 1 || ao.rounds < 1):
		return usageError("with --copies, -s and --rounds must be positive")
	case ao.copies && ao.serve && ao.peer != "":
		return usageError("--serve and --peer exclude each other")
	case ao.serve && ao.cpu >= 0:
		return usageError("--serve runs on the CPU that %s names, which gdrbench --cpu sets, not on --cpu", cpuEnv)
	case ao.cpu < -1:
		return usageError("--cpu must be a CPU number, or -1 for none")
	case ao.copies && ao.serve:
		return ao.serveCopies(o, in)
	case ao.copies:
		return ao.runCopies(o)
	case ao.peer != "" || ao.serve || ao.cpu >= 0:
		return usageError("--peer, --serve and --cpu need --copies")
	case ao.size < gpuPageSize || ao.iters < 1 || ao.warmup < 0:
		return usageError("-s must be at least 65536, -n positive and -w not negative")
	}
	return ao.run(o)
}

// apiRow is one buffer size of apiperf: the mean time of each operation.
type apiRow struct {
	Size      int     `json:"size"`
	PinUS     float64 `json:"pin_us"`
	MapUS     float64 `json:"map_us"`
	GetInfoUS float64 `json:"get_info_us"`
	UnmapUS   float64 `json:"unmap_us"`
	UnpinUS   float64 `json:"unpin_us"`
}

func (ao *apiPerfOptions) run(o *globalOptions) (err error) {
	e := o.setup("apiperf", uint64(ao.size), false)
	defer e.closeInto(&err)
	if err := e.ready(); err != nil {
		return err
	}
	e.header()
	rows := []apiRow{}
	for size := gpuPageSize; size <= ao.size; size <<= 1 {
		var total [5]time.Duration
		for i := range ao.warmup + ao.iters {
			t, err := e.apiRound(uint64(size))
			if err != nil {
				return failError(fmt.Errorf("size %d: %w", size, err))
			}
			if i >= ao.warmup {
				for k := range t {
					total[k] += t[k]
				}
			}
		}
		mean := func(k int) float64 { return us(total[k]) / float64(ao.iters) }
		rows = append(rows, apiRow{Size: size, PinUS: mean(0), MapUS: mean(1), GetInfoUS: mean(2), UnmapUS: mean(3), UnpinUS: mean(4)})
	}
	e.rep.Results = rows
	if o.format == "json" {
		return o.writeJSON(e.rep)
	}
	tw := tabwriter.NewWriter(o.stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "Size(B)\tpin.Time(us)\tmap.Time(us)\tget_info.Time(us)\tunmap.Time(us)\tunpin.Time(us)")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\n", r.Size, r.PinUS, r.MapUS, r.GetInfoUS, r.UnmapUS, r.UnpinUS)
	}
	return tw.Flush()
}

// apiRound pins, maps, queries, unmaps and unpins size bytes once and
// returns the time of each step.
func (e *env) apiRound(size uint64) (t [5]time.Duration, err error) {
	start := time.Now()
	buf, err := e.drv.Pin(e.va, size, gdrcopy.PinDefault)
	if err != nil {
		return t, err
	}
	t[0] = time.Since(start)

	start = time.Now()
	m, err := buf.Map()
	if err != nil {
		return t, errors.Join(err, buf.Close())
	}
	t[1] = time.Since(start)

	start = time.Now()
	_, err = buf.Info()
	t[2] = time.Since(start)
	if err != nil {
		return t, errors.Join(err, buf.Close())
	}

	start = time.Now()
	err = m.Close()
	t[3] = time.Since(start)
	if err != nil {
		return t, errors.Join(err, buf.Close())
	}

	start = time.Now()
	err = buf.Close()
	t[4] = time.Since(start)
	return t, err
}
