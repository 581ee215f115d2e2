package snapshot

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/p2pkit/p2pkit/hostfs"
)

// captureOp is one call a reader's capture recorded: an add of m at name, its data
// to be passed through edit when it is replayed, or, with m nil, a skip of err.
type captureOp struct {
	name string
	m    *member
	edit func(*capture, []byte)
	err  error
}

// replay makes the calls ops recorded, in their order.
func (c *capture) replay(ops []captureOp) {
	for _, op := range ops {
		if op.m == nil {
			c.skip(op.err)
			continue
		}
		c.addEdit(op.name, op.m, op.edit)
	}
}

// Readers of a capture. Directories are handed out in runs of dirsPerJob, so each
// reader's Walker keeps the parents it opened for the next. At most jobsAhead runs
// are read and not yet written, and a reader records at most jobBytes of file data
// for one run: a directory that would take it past is left to the capture proper,
// which reads it as one goroutine does, streaming. So what readers hold is bounded
// (about 20 MiB) however large the machine or its directories; a run of a real
// machine's directories records a few tens of KiB.
const (
	maxReaders = 4
	dirsPerJob = 8
	jobsAhead  = 16
	jobBytes   = 1 << 20
)

// captureReaders is how many reader goroutines a capture may start: one per CPU, at
// most maxReaders. Tests set it to compare captures read ahead and not.
var captureReaders = func() int { return min(runtime.GOMAXPROCS(0), maxReaders) }

// readDirs captures the device directories dirs, in their order, with deviceDir.
// Where there are CPUs to spare, reader goroutines read them ahead, each through
// a capture that records (rec) what the capture proper then replays in order: the
// archive, its order and the list of what was left out are the same as one
// goroutine's. Redaction runs at replay (its pseudonyms are numbered in order).
func (c *capture) readDirs(dirs []string) {
	readers := min(captureReaders(), (len(dirs)+dirsPerJob-1)/dirsPerJob)
	if readers < 2 {
		w := hostfs.NewWalker(c.src)
		defer w.Close()
		for _, dir := range dirs {
			c.deviceDir(w, dir)
		}
		return
	}
	type result struct {
		ops  []captureOp // the recorded calls for dirs[:rest]
		rest int         // dirs[rest:] are left to the capture proper
	}
	type job struct {
		dirs []string
		done chan result
	}
	var stop atomic.Bool // the capture has failed: what is left is not read
	jobs := make(chan *job)
	order := make(chan *job, jobsAhead)
	go func() {
		defer close(jobs)
		defer close(order)
		for i := 0; i < len(dirs); i += dirsPerJob {
			j := &job{dirs: dirs[i:min(i+dirsPerJob, len(dirs))], done: make(chan result, 1)}
			order <- j // blocks while jobsAhead runs wait to be written
			jobs <- j
		}
	}()
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() {
			var ops []captureOp
			r := &capture{src: c.src, redact: c.redact, buf: make([]byte, len(c.buf)), rec: &ops}
			w := hostfs.NewWalker(c.src)
			defer w.Close()
			for j := range jobs {
				ops, r.recBytes = nil, 0
				res := result{rest: len(j.dirs)}
				for i, dir := range j.dirs {
					if stop.Load() {
						break
					}
					mark := len(ops)
					r.deviceDir(w, dir)
					if r.recBytes > jobBytes {
						res.rest = i
						ops = ops[:mark]
						break
					}
				}
				res.ops = ops
				j.done <- res
			}
		})
	}
	own := hostfs.NewWalker(c.src) // for the directories left to the capture proper
	defer own.Close()
	for j := range order {
		res := <-j.done
		c.replay(res.ops)
		for _, dir := range j.dirs[res.rest:] {
			c.deviceDir(own, dir)
		}
		if c.err != nil {
			stop.Store(true)
		}
	}
	wg.Wait()
}
