package rusage

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Median returns the middle value of xs (the mean of the two middle ones for an even
// count); xs must not be empty.
func Median[T time.Duration | float64](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// LoadAverage returns the 1-minute load average from /proc/loadavg, "?" where it
// cannot be read.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// Grouped writes n with its thousands separated by commas, as the README writes
// counts: 1028 is "1,028".
func Grouped(n int64) string {
	s := strconv.FormatInt(n, 10)
	sign := ""
	if n < 0 {
		sign, s = "-", s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return sign + s
}
