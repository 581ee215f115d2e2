// Package bytesize formats byte counts the one way every p2pkit output prints them.
package bytesize

import "strconv"

var units = [...]string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}

// Format prints n in the largest binary unit (IEC 80000-13) in which it is at least
// 1, with one decimal when it is not a whole number of that unit: "512 B",
// "16 MiB", "1.5 GiB", "256 GiB". The decimal is rounded, so "1.0 GiB" can stand for
// a count slightly off a whole GiB.
func Format(n uint64) string {
	i := 0
	v := float64(n)
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if v == float64(uint64(v)) {
		return strconv.FormatUint(uint64(v), 10) + " " + units[i]
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + units[i]
}
