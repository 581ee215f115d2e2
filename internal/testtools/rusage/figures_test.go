package rusage

import (
	"os"
	"strconv"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, tt := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		in := append([]float64(nil), tt.in...)
		if got := Median(tt.in); got != tt.want {
			t.Errorf("Median(%v) = %v, want %v", in, got, tt.want)
		}
		for i := range in {
			if in[i] != tt.in[i] {
				t.Errorf("Median reordered its input: %v, was %v", tt.in, in)
			}
		}
	}
	if got := Median([]time.Duration{5, 1, 3}); got != 3 {
		t.Errorf("Median of durations = %v, want 3", got)
	}
}

func TestGrouped(t *testing.T) {
	for _, tt := range []struct {
		in   int64
		want string
	}{
		{0, "0"}, {999, "999"}, {1000, "1,000"}, {1028, "1,028"}, {25658, "25,658"},
		{1234567, "1,234,567"}, {-1028, "-1,028"}, {-999, "-999"},
	} {
		if got := Grouped(tt.in); got != tt.want {
			t.Errorf("Grouped(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestLoadAverage: where /proc/loadavg can be read, the figure is its first field,
// a number.
func TestLoadAverage(t *testing.T) {
	got := LoadAverage()
	if _, err := os.ReadFile("/proc/loadavg"); err != nil {
		if got != "?" {
			t.Errorf("LoadAverage = %q without /proc/loadavg, want \"?\"", got)
		}
		return
	}
	if _, err := strconv.ParseFloat(got, 64); err != nil {
		t.Errorf("LoadAverage = %q, want a number: %v", got, err)
	}
}
