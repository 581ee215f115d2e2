package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"text/tabwriter"
	"time"
	"unsafe"

	"github.com/p2pkit/p2pkit/gdrcopy"
)

// copyBatch is about how long one side's batch of copies runs in a round:
// short, so that the sides of a round see the same machine.
const copyBatch = 200 * time.Microsecond

// copiesMemory says what apiperf --copies runs on, for both outputs.
const copiesMemory = "write-back host memory (a memfd mapped write-combining through the DMA-BUF backend), " +
	"the host buffer 64 bytes past a page boundary, both buffers written first"

// copiesInfo describes an apiperf --copies run in the JSON report.
type copiesInfo struct {
	Memory  string  `json:"memory"`
	Rounds  int     `json:"rounds"`
	BatchUS float64 `json:"batch_us"`
	Peer    string  `json:"peer,omitempty"`
	CPU     *int    `json:"cpu,omitempty"` // --cpu
}

// copyRow is one direction and size of apiperf --copies: the medians and
// minimums over the rounds of the time per copy, and the median, minimum
// and maximum of the per-round ratios to the peer.
type copyRow struct {
	Direction   string     `json:"direction"`
	Size        int        `json:"size"`
	Iters       int        `json:"iters"`
	P2PKitNS    float64    `json:"p2pkit_ns"`
	P2PKitMinNS float64    `json:"p2pkit_min_ns"`
	KernelNS    float64    `json:"kernel_ns"`
	KernelMinNS float64    `json:"kernel_min_ns"`
	PeerNS      *float64   `json:"peer_ns,omitempty"`
	PeerMinNS   *float64   `json:"peer_min_ns,omitempty"`
	Ratio       *ratioJSON `json:"p2pkit_over_peer,omitempty"`
	KernelRatio *ratioJSON `json:"kernel_over_peer,omitempty"`
}

// ratioJSON summarizes the ratios of the rounds.
type ratioJSON struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// copySide is one implementation the rounds time: it returns the time of
// iters copies of size bytes in direction dir ("to" or "from").
type copySide func(dir string, size, iters int) (time.Duration, error)

// copyCase is one direction and size, with the time per copy of each side
// in each round.
type copyCase struct {
	dir         string
	size, iters int
	perCopy     [][]float64 // nanoseconds, [side][round]
}

// runCopies is apiperf --copies: CopyToDevice and CopyFromDevice, the bare
// kernels, and the peer's copies if there is one, in interleaved rounds.
func (ao *apiPerfOptions) runCopies(o *globalOptions) (err error) {
	notes, err := ao.checkCopiesCPU(o)
	if err != nil {
		return err
	}
	d, m, err := openHostMapping(ao.size)
	if err != nil {
		return failError(err)
	}
	defer func() { err = errors.Join(err, d.Close()) }()
	sides, info, stop, err := ao.copySides(o, m)
	if err != nil {
		return failError(err)
	}
	defer func() { err = errors.Join(err, stop()) }()
	if ao.cpu >= 0 {
		// After the peer started, which must not inherit the pinning.
		unpin, perr := pinThread(ao.cpu)
		if perr != nil {
			return failError(perr)
		}
		defer func() { err = errors.Join(err, unpin()) }()
	}
	cases, err := calibrate(sides[0], copySizes(ao.size))
	if err != nil {
		return failError(err)
	}
	if err := measureRounds(sides, cases, ao.rounds); err != nil {
		return failError(err)
	}
	rep := &report{Tool: "apiperf", Device: o.device, Copies: info, Notes: notes}
	rows := make([]copyRow, len(cases))
	for i, c := range cases {
		rows[i] = c.row()
	}
	rep.Results = rows
	if o.format == "json" {
		return o.writeJSON(rep)
	}
	return writeCopiesText(o, info, rows)
}

// checkCopiesCPU checks --cpu against the CPUs this process may run on and
// returns a note, printed to standard error in text output, where they are
// one: then the Go runtime's threads run on the CPU the copies are timed on.
func (ao *apiPerfOptions) checkCopiesCPU(o *globalOptions) ([]string, error) {
	cpus, err := checkCPU(ao.cpu)
	switch {
	case err != nil && ao.cpu < 0: // no note, then
		return nil, nil
	case err != nil && cpus != nil:
		return nil, usageError("--cpu: %v", err)
	case err != nil:
		return nil, failError(fmt.Errorf("--cpu: %w", err))
	case len(cpus) > 1:
		return nil, nil
	}
	msg := fmt.Sprintf("this process may run on CPU %d only, so the Go runtime's own threads share it with the timed copies "+
		"and interrupt them; --cpu N on a process with more CPUs pins only the timing thread (apiperf --help)", cpus[0])
	if o.format == "text" {
		fmt.Fprintln(o.stderr, "gdrbench:", msg)
	}
	return []string{msg}, nil
}

// copySides returns the sides to time: the API on m, its kernels, and the
// peer if ao names one, whose stop function ends it.
func (ao *apiPerfOptions) copySides(o *globalOptions, m *gdrcopy.Mapping) ([]copySide, *copiesInfo, func() error, error) {
	api, kernel := ownSides(m, ao.size)
	info := &copiesInfo{Memory: copiesMemory, Rounds: ao.rounds, BatchUS: us(copyBatch)}
	if ao.cpu >= 0 {
		info.CPU = &ao.cpu
	}
	sides := []copySide{api, kernel}
	if ao.peer == "" {
		return sides, info, func() error { return nil }, nil
	}
	p, err := startPeer(ao.peer, ao.cpu, o.stderr)
	if err != nil {
		return nil, nil, nil, err
	}
	info.Peer = p.name
	return append(sides, p.measure), info, p.close, nil
}

// ownSides returns gdrbench's own sides on m, for copies of up to max
// bytes: the API (CopyToDevice, CopyFromDevice) and the bare kernels. Each
// batch first writes both buffers, as the peer protocol has the peer do.
func ownSides(m *gdrcopy.Mapping, max int) (api, kernel copySide) {
	dev := m.Bytes()
	host := hostBytes(max)
	toK, fromK := m.Kernels()
	write := func(size int) {
		fill(dev[:size], 1)
		fill(host[:size], 2)
	}
	api = func(dir string, size, iters int) (time.Duration, error) {
		write(size)
		if dir == "to" {
			return timeCopyToDevice(m, host[:size], iters)
		}
		return timeCopyFromDevice(m, host[:size], iters)
	}
	kernel = func(dir string, size, iters int) (time.Duration, error) {
		write(size)
		if dir == "to" {
			return timeKernel(toK, dev[:size], host[:size], iters), nil
		}
		return timeKernel(fromK, host[:size], dev[:size], iters), nil
	}
	return api, kernel
}

// serveCopies is apiperf --copies --serve: the peer's side of the protocol
// on in and o.stdout, with this gdrbench's CopyToDevice and CopyFromDevice
// on copies of up to -s bytes, timed on the CPU that cpuEnv names if it is
// set (on one thread: the rest of the runtime's stay unpinned). With it gdrbench is its own peer, which
// shows how far apart two runs of the same copies come out.
func (ao *apiPerfOptions) serveCopies(o *globalOptions, in io.Reader) (err error) {
	d, m, err := openHostMapping(ao.size)
	if err != nil {
		return failError(err)
	}
	defer func() { err = errors.Join(err, d.Close()) }()
	api, _ := ownSides(m, ao.size)
	cpu, err := envCPU()
	if err == nil && cpu >= 0 {
		if _, cerr := checkCPU(cpu); cerr != nil {
			err = fmt.Errorf("%s: %w", cpuEnv, cerr)
		}
	}
	if err != nil {
		return failError(err)
	}
	where := ""
	if cpu >= 0 {
		unpin, perr := pinThread(cpu)
		if perr != nil {
			return failError(perr)
		}
		defer func() { err = errors.Join(err, unpin()) }()
		where = fmt.Sprintf(" on CPU %d", cpu)
	}
	fmt.Fprintf(o.stdout, "%s%s CopyToDevice/CopyFromDevice%s\n", peerGreeting, versionLine(), where)
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if sc.Text() == "quit" {
			return nil
		}
		var dir string
		var size, iters int
		_, perr := fmt.Sscanf(sc.Text(), "%s %d %d", &dir, &size, &iters)
		switch {
		case perr != nil || (dir != "to" && dir != "from"):
			fmt.Fprintln(o.stdout, "error not a request: want to|from <size> <iters>")
		case size < 1 || size > ao.size || iters < 1:
			fmt.Fprintf(o.stdout, "error size must be 1 to %d (-s) and iters positive\n", ao.size)
		default:
			t, err := api(dir, size, iters)
			if err != nil {
				fmt.Fprintf(o.stdout, "error %v\n", err)
				continue
			}
			fmt.Fprintln(o.stdout, max(t.Nanoseconds(), 1))
		}
	}
	return sc.Err()
}

// timeCopyToDevice, timeCopyFromDevice and timeKernel are a batch of one
// side, as the peer protocol has the peer do it once it has written both
// buffers: one copy untimed, then iters copies timed. Each calls the copy
// directly in its loop, as the peer's loop calls libgdrapi.
func timeCopyToDevice(m *gdrcopy.Mapping, src []byte, iters int) (time.Duration, error) {
	if err := m.CopyToDevice(0, src); err != nil {
		return 0, err
	}
	start := time.Now()
	for range iters {
		if err := m.CopyToDevice(0, src); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

func timeCopyFromDevice(m *gdrcopy.Mapping, dst []byte, iters int) (time.Duration, error) {
	if err := m.CopyFromDevice(dst, 0); err != nil {
		return 0, err
	}
	start := time.Now()
	for range iters {
		if err := m.CopyFromDevice(dst, 0); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

func timeKernel(k func(dst, src []byte) int, dst, src []byte, iters int) time.Duration {
	k(dst, src)
	start := time.Now()
	for range iters {
		k(dst, src)
	}
	return time.Since(start)
}

// fill writes every byte of b, whose length is a multiple of 8 or less
// than 8, with ordinary stores of 8-byte words from the start, as the peer
// protocol asks: no copy, so that nothing is read, and no memset, which can
// take streaming stores for large buffers.
func fill(b []byte, seed uint64) {
	words := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8)
	for i := range words {
		words[i] = uint64(i)*0x9e3779b97f4a7c15 ^ seed
	}
	for i := len(words) * 8; i < len(b); i++ {
		b[i] = byte(seed)
	}
}

// hostOffset is where in its page the host buffer of a copy begins, on
// every side (the peer protocol asks the same of a peer). The device side
// is a page-aligned mapping; a host buffer at the same page offset makes
// large copies to write-back memory slower on some CPUs (to the device,
// 1 MiB: 72-77 against 65-68 µs on an H200 host's Xeon; 16 MiB: 1.44
// against 1.19-1.28 ms there, 565 against 475 µs on a 2-core EPYC), an
// effect of where the two buffers fall in the caches and DRAM that a BAR
// behind PCIe does not have. So a side's figure would depend on where its
// allocator puts a buffer unless all sides use one offset: 64 is where
// glibc's posix_memalign(64) puts a large block.
const hostOffset = 64

// hostBytes returns n bytes starting hostOffset bytes past a page boundary.
func hostBytes(n int) []byte {
	page := os.Getpagesize()
	b := make([]byte, n+page+hostOffset)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))))&(page-1) + hostOffset
	return b[off : off+n : off+n]
}

// calibrate returns a case for both directions of every size, with the
// number of copies, a power of two, that takes side at least copyBatch.
func calibrate(side copySide, sizes []int) ([]copyCase, error) {
	var cases []copyCase
	for _, size := range sizes {
		for _, dir := range []string{"to", "from"} {
			iters := 1
			for ; iters < 1<<24; iters *= 2 {
				d, err := side(dir, size, iters)
				if err != nil {
					return nil, err
				}
				if d >= copyBatch {
					break
				}
			}
			cases = append(cases, copyCase{dir: dir, size: size, iters: iters})
		}
	}
	return cases, nil
}

// measureRounds runs rounds rounds; in each, every case runs one batch on
// every side, the sides taking turns at going first from round to round.
func measureRounds(sides []copySide, cases []copyCase, rounds int) error {
	for i := range cases {
		cases[i].perCopy = make([][]float64, len(sides))
	}
	for r := range rounds {
		for i := range cases {
			c := &cases[i]
			for k := range sides {
				s := (r + k) % len(sides)
				d, err := sides[s](c.dir, c.size, c.iters)
				if err != nil {
					return fmt.Errorf("%s %d bytes: %w", c.dir, c.size, err)
				}
				c.perCopy[s] = append(c.perCopy[s], float64(d.Nanoseconds())/float64(c.iters))
			}
		}
	}
	return nil
}

// row summarizes c: median and minimum of each side, and the per-round
// ratios of the API and the kernel to the peer where there is one.
func (c copyCase) row() copyRow {
	dir := "to_device"
	if c.dir == "from" {
		dir = "from_device"
	}
	sorted := make([][]float64, len(c.perCopy))
	for i, q := range c.perCopy {
		sorted[i] = slices.Sorted(slices.Values(q))
	}
	med := func(side int) float64 { return sorted[side][(len(sorted[side])-1)/2] }
	r := copyRow{Direction: dir, Size: c.size, Iters: c.iters,
		P2PKitNS: med(0), P2PKitMinNS: sorted[0][0], KernelNS: med(1), KernelMinNS: sorted[1][0]}
	if len(c.perCopy) > 2 {
		peer, peerMin := med(2), sorted[2][0]
		r.PeerNS, r.PeerMinNS = &peer, &peerMin
		r.Ratio = ratios(c.perCopy[0], c.perCopy[2])
		r.KernelRatio = ratios(c.perCopy[1], c.perCopy[2])
	}
	return r
}

// ratios returns the median (the lower middle, as summarize takes),
// minimum and maximum of a[i]/b[i].
func ratios(a, b []float64) *ratioJSON {
	q := make([]float64, len(a))
	for i := range a {
		q[i] = a[i] / b[i]
	}
	slices.Sort(q)
	return &ratioJSON{Median: q[(len(q)-1)/2], Min: q[0], Max: q[len(q)-1]}
}

// writeCopiesText prints the rows of apiperf --copies.
func writeCopiesText(o *globalOptions, info *copiesInfo, rows []copyRow) error {
	w := o.stdout
	fmt.Fprintf(w, "copies on %s\n", info.Memory)
	fmt.Fprintf(w, "%d rounds; in each, every test runs a batch of about %v on each side in turn; "+
		"time per copy: median and minimum over the rounds; ratios: median, minimum and maximum of the rounds'\n",
		info.Rounds, copyBatch)
	if info.CPU != nil {
		fmt.Fprintf(w, "gdrbench's copies on CPU %d (--cpu), its other threads elsewhere\n", *info.CPU)
	}
	if info.Peer != "" {
		fmt.Fprintf(w, "peer: %s\n", info.Peer)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprint(tw, "Test\tSize(B)\tp2pkit(ns)\tmin\tkernel(ns)\tmin")
	if info.Peer != "" {
		fmt.Fprint(tw, "\tpeer(ns)\tmin\tp2pkit/peer\tmin\tmax\tkernel/peer")
	}
	fmt.Fprintln(tw)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f", r.Direction, r.Size, r.P2PKitNS, r.P2PKitMinNS, r.KernelNS, r.KernelMinNS)
		if r.PeerNS != nil {
			fmt.Fprintf(tw, "\t%.1f\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f", *r.PeerNS, *r.PeerMinNS,
				r.Ratio.Median, r.Ratio.Min, r.Ratio.Max, r.KernelRatio.Median)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}
