package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

type copyLatOptions struct {
	size     int
	wIters   int
	rIters   int
	cuMemcpy bool
}

func newCopyLatCommand(o *globalOptions) *cobra.Command {
	co := &copyLatOptions{}
	cmd := &cobra.Command{
		Use:   "copylat",
		Short: "copy latency per size through the mapping, and of cuMemcpy (gdrcopy_copylat)",
		Long: `copylat measures the CPU-side time of one copy to and from the mapping for
every size from 1 byte to -s, doubling, like gdrcopy_copylat. The iterations
of each test are split into 100 groups; it prints the median and the minimum
of the groups' mean times. The time is that of the CPU stores: the data may
not yet be visible to the GPU when the call returns. Beside each mapping test
it measures the copy kernel alone (the same stores and fences without the
API's state and bounds checks and fault handling, see Mapping.Kernels), so
the difference is what the API adds.

-c adds cuMemcpyHtoD and cuMemcpyDtoH from page-locked host memory, the
cudaMemcpy baseline. When gdrdrv is not usable copylat still measures that
baseline (if a GPU is present) before printing the diagnosis.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if co.size < 1 || co.wIters < 1 || co.rIters < 1 {
				return usageError("-s, -w and -r must be positive")
			}
			return co.run(o)
		},
	}
	f := cmd.Flags()
	f.IntVarP(&co.size, "size", "s", 16<<20, "largest copy size in bytes")
	f.IntVarP(&co.wIters, "write-iters", "w", 10000, "iterations of each write (to mapping, HtoD) test")
	f.IntVarP(&co.rIters, "read-iters", "r", 100, "iterations of each read (from mapping, DtoH) test")
	f.BoolVarP(&co.cuMemcpy, "cumemcpy", "c", false, "also measure cuMemcpyHtoD/DtoH from pinned host memory")
	return cmd
}

// latRow is one size of copylat. A nil test was not run.
type latRow struct {
	Size        int          `json:"size"`
	ToMapping   *latencyJSON `json:"gdr_copy_to_mapping,omitempty"`
	ToKernel    *latencyJSON `json:"kernel_to_mapping,omitempty"`
	FromMapping *latencyJSON `json:"gdr_copy_from_mapping,omitempty"`
	FromKernel  *latencyJSON `json:"kernel_from_mapping,omitempty"`
	HtoD        *latencyJSON `json:"cumemcpy_htod,omitempty"`
	DtoH        *latencyJSON `json:"cumemcpy_dtoh,omitempty"`
}

// copySizes returns 1, 2, 4, ... up to max.
func copySizes(max int) []int {
	var s []int
	for n := 1; n <= max; n <<= 1 {
		s = append(s, n)
	}
	return s
}

func (co *copyLatOptions) run(o *globalOptions) (err error) {
	e := o.setup("copylat", uint64(co.size), true)
	defer e.closeInto(&err)
	sizes := copySizes(co.size)
	rows := make([]latRow, len(sizes))
	for i, s := range sizes {
		rows[i].Size = s
	}
	e.rep.Results = rows

	// The baseline needs a CUDA allocation; with --va there is none.
	baseline := co.cuMemcpy || e.drv == nil
	if baseline && e.mem == nil {
		why := e.noGPU
		if why == nil {
			why = fmt.Errorf("--va memory is not a CUDA allocation of gdrbench")
		}
		e.note("no cuMemcpy baseline: %v", why)
		baseline = false
	}
	if baseline {
		htod, dtoh, err := memcpyBaseline(e.mem, sizes, co.wIters, co.rIters)
		if err != nil {
			return failError(fmt.Errorf("cuMemcpy baseline: %w", err))
		}
		for i := range rows {
			rows[i].HtoD, rows[i].DtoH = htod[i].json(), dtoh[i].json()
		}
	}
	if e.drv == nil || e.va == 0 {
		// Print what could be measured, then the diagnosis.
		if err := co.write(e, rows); err != nil {
			return err
		}
		return e.require()
	}

	buf, m, err := e.pinMap()
	if err != nil {
		return failError(err)
	}
	defer buf.Close()
	host := make([]byte, co.size)
	for i := range host {
		host[i] = byte(i)
	}
	toKernel, fromKernel := m.Kernels()
	dev := m.Bytes()
	for i, s := range sizes {
		src := host[:s]
		to, err := measureLatency(co.wIters, func() error { return m.CopyToDevice(0, src) })
		if err != nil {
			return failError(err)
		}
		toK, _ := measureLatency(co.wIters, func() error { toKernel(dev[:s], src); return nil })
		from, err := measureLatency(co.rIters, func() error { return m.CopyFromDevice(src, 0) })
		if err != nil {
			return failError(err)
		}
		fromK, _ := measureLatency(co.rIters, func() error { fromKernel(src, dev[:s]); return nil })
		rows[i].ToMapping, rows[i].FromMapping = to.json(), from.json()
		rows[i].ToKernel, rows[i].FromKernel = toK.json(), fromK.json()
	}
	return co.write(e, rows)
}

func (co *copyLatOptions) write(e *env, rows []latRow) error {
	if e.o.format == "json" {
		return e.o.writeJSON(e.rep)
	}
	e.header()
	if rows[0] == (latRow{Size: rows[0].Size}) {
		return nil // nothing was measured
	}
	tw := tabwriter.NewWriter(e.o.stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "Test\tSize(B)\tMedian Time(us)\tMin. Time(us)\tKernel alone: Median(us)\tMin.(us)")
	column := func(name string, get, kernel func(latRow) *latencyJSON) {
		for _, r := range rows {
			l := get(r)
			if l == nil {
				continue
			}
			fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f", name, r.Size, l.MedianUS, l.MinUS)
			if k := kernel(r); k != nil {
				fmt.Fprintf(tw, "\t%.3f\t%.3f", k.MedianUS, k.MinUS)
			}
			fmt.Fprintln(tw)
		}
	}
	none := func(latRow) *latencyJSON { return nil }
	column("gdr_copy_to_mapping", func(r latRow) *latencyJSON { return r.ToMapping }, func(r latRow) *latencyJSON { return r.ToKernel })
	column("gdr_copy_from_mapping", func(r latRow) *latencyJSON { return r.FromMapping }, func(r latRow) *latencyJSON { return r.FromKernel })
	column("cuMemcpyHtoD", func(r latRow) *latencyJSON { return r.HtoD }, none)
	column("cuMemcpyDtoH", func(r latRow) *latencyJSON { return r.DtoH }, none)
	return tw.Flush()
}
