package main

import (
	"slices"
	"time"
)

// buckets is how many groups the iterations of a latency test are split into,
// as gdrcopy_copylat does: each group's mean is one sample, and the report
// gives the median and minimum of the samples, so a few slow calls (an
// interrupt, a page fault) do not move the result.
const buckets = 100

// latency is the per-call time of one test at one size.
type latency struct {
	Median time.Duration
	Min    time.Duration
}

// latencyJSON is latency in microseconds, as the text output prints it.
type latencyJSON struct {
	MedianUS float64 `json:"median_us"`
	MinUS    float64 `json:"min_us"`
}

func (l latency) json() *latencyJSON {
	return &latencyJSON{MedianUS: us(l.Median), MinUS: us(l.Min)}
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// measureLatency calls f iters times, in min(iters, buckets) groups, and
// returns the median and minimum of the groups' mean call times. It stops at
// the first error.
func measureLatency(iters int, f func() error) (latency, error) {
	if iters < 1 {
		iters = 1
	}
	n := min(iters, buckets)
	samples := make([]time.Duration, 0, n)
	for b := range n {
		// Spread the remainder so that the groups add up to iters.
		count := iters/n + btoi(b < iters%n)
		start := time.Now()
		for range count {
			if err := f(); err != nil {
				return latency{}, err
			}
		}
		samples = append(samples, time.Since(start)/time.Duration(count))
	}
	return summarize(samples), nil
}

// summarize returns the median (the lower middle for an even count) and the
// minimum of samples, which must not be empty.
func summarize(samples []time.Duration) latency {
	s := slices.Clone(samples)
	slices.Sort(s)
	return latency{Median: s[(len(s)-1)/2], Min: s[0]}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// bandwidthMiBps returns bytes*iters over d in MiB/s (2^20 bytes), the unit
// gdrcopy_copybw calls MB/s.
func bandwidthMiBps(bytes, iters int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) * float64(iters) / d.Seconds() / (1 << 20)
}
