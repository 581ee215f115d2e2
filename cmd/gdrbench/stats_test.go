package main

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSummarize(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		d := make([]time.Duration, len(v))
		for i, x := range v {
			d[i] = time.Duration(x) * time.Millisecond
		}
		return d
	}
	tests := []struct {
		in   []time.Duration
		want latency
	}{
		{ms(5), latency{Median: 5 * time.Millisecond, Min: 5 * time.Millisecond}},
		{ms(9, 1, 5), latency{Median: 5 * time.Millisecond, Min: time.Millisecond}},
		{ms(4, 3, 2, 100), latency{Median: 3 * time.Millisecond, Min: 2 * time.Millisecond}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, summarize(tt.in)); diff != "" {
			t.Errorf("summarize(%v) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestMeasureLatencyCalls(t *testing.T) {
	tests := []struct{ iters, want int }{
		{0, 1}, {1, 1}, {99, 99}, {100, 100}, {101, 101}, {10000, 10000}, {250, 250},
	}
	for _, tt := range tests {
		calls := 0
		if _, err := measureLatency(tt.iters, func() error { calls++; return nil }); err != nil {
			t.Fatal(err)
		}
		if calls != tt.want {
			t.Errorf("measureLatency(%d) made %d calls, want %d", tt.iters, calls, tt.want)
		}
	}
	boom := errors.New("boom")
	calls := 0
	_, err := measureLatency(1000, func() error {
		calls++
		if calls == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || calls != 3 {
		t.Errorf("measureLatency with a failing call: err %v after %d calls, want boom after 3", err, calls)
	}
}

func TestBandwidth(t *testing.T) {
	tests := []struct {
		bytes, iters int
		d            time.Duration
		want         float64
	}{
		{1 << 20, 1, time.Second, 1},
		{128 << 10, 10000, time.Second, 1250},
		{1, 1, 0, 0},
	}
	for _, tt := range tests {
		if got := bandwidthMiBps(tt.bytes, tt.iters, tt.d); got != tt.want {
			t.Errorf("bandwidthMiBps(%d, %d, %v) = %v, want %v", tt.bytes, tt.iters, tt.d, got, tt.want)
		}
	}
}
